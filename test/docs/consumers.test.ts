/**
 * docs/consumers.md's `consumers ls` against the real command, beside a server that was polled:
 * the page's table has the command's columns, in order, and every field the page names for
 * `--json` is in the command's JSON.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { consumersCli, consumersLs, makeFixture, poll, serverEnv, start, storedConsumers } from '../helpers/consumers.js'

const page = readFileSync(new URL('../../docs/consumers.md', import.meta.url), 'utf8')

t.test('the page shows the columns and the JSON fields of consumers ls', async (t) => {
  const f = await makeFixture()
  const s = await start(serverEnv(f.dir))
  t.teardown(() => s.server.stop())
  await poll(s.server.port, { key: f.key, userAgent: 'PAN-OS/10.2.4' })
  await storedConsumers(s.server, (c) => c.length > 0)

  const text = await consumersCli(f.dir, ['ls', '--workspace', f.workspaceId])
  t.equal(text.code, 0, text.stderr)
  const columns = (line: string): string[] => line.trim().split(/ {2,}/)
  const shownHeader = /^STATE .*$/m.exec(page)![0]
  t.same(columns(shownHeader), columns(text.stdout.split('\n')[0]!), 'the columns, in order')

  const rows = await consumersLs(f.dir, ['--workspace', f.workspaceId])
  t.equal(rows.length, 1)
  const paragraph = page.slice(page.indexOf('`--json` prints'), page.indexOf('\n\n', page.indexOf('`--json` prints')))
  const named = [...paragraph.matchAll(/`([a-zA-Z0-9_]+)`/g)].map((m) => m[1]!)
  t.ok(named.length >= 10, `${named.length} fields named`)
  for (const field of named) t.ok(field in rows[0]!, `--json has ${field}`)
})
