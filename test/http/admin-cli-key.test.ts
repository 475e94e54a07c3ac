/**
 * `threatfeed key create --scopes admin:all` on the server's machine makes the one key that
 * manages every workspace over HTTP (issue 22); the CLI's key made beside a running server works
 * there at once.
 */
import t from 'tap'
import { keyCommand } from '../../src/cli/key.js'
import { runCommand } from '../helpers/cli.js'
import { startAdminServer } from '../helpers/admin-server.js'

const srv = await startAdminServer()
t.teardown(() => srv.close())

t.test('key create --scopes admin:all, then the admin API with it', async (t) => {
  const env = { ...process.env, THREATFEED_DATA_DIR: srv.server.config.dataDir, THREATFEED_LOG_LEVEL: 'silent' }
  const made = await runCommand(keyCommand, ['create', '--workspace', srv.other.id, '--scopes', 'admin:all', '--json'], { env })
  t.equal(made.code, 0, made.stderr)
  const { key } = JSON.parse(made.stdout) as { key: string }
  const r = await fetch(`${srv.base}/v1/admin/workspaces`, { headers: { authorization: `Bearer ${key}` } })
  t.equal(r.status, 200)
  const body = await r.json() as { items: Array<{ id: string }> }
  t.ok([srv.main.id, srv.other.id].every((id) => body.items.some((w) => w.id === id)), 'every workspace')
  const bad = await runCommand(keyCommand, ['create', '--workspace', srv.other.id, '--scopes', 'admin:some', '--json'], { env })
  t.equal(bad.code, 2)
  t.match(bad.stderr, /unknown scope "admin:some"; scopes are signals:write, feeds:read, rules:read, admin, admin:all/)
})
