/**
 * A list whose publish guard holds its first build (issue 36): its feed answers 503 at once with
 * `X-Feed-Held`, `Retry-After` and a message naming the guard and the command that publishes it
 * (it answered a bare 500 after a 10 s wait); its pollers, which only ever get 503, turn stale;
 * `threatfeed list accept` publishes within a second (the failure backoff used to hold the build
 * back for up to the rebuild interval); a second accept says it was done already.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { openStore } from '../../src/store/open.js'
import { consumersLs, eventually, makeFixture, serverEnv, start } from '../helpers/consumers.js'

function cli (dir: string, args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> {
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', ...args], {
    env: { PATH: process.env.PATH, THREATFEED_DATA_DIR: dir, THREATFEED_CONSUMER_STALE: '2s' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (c: string) => { stdout += c })
  child.stderr.setEncoding('utf8').on('data', (c: string) => { stderr += c })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => { resolve({ code, stdout, stderr }) })
  })
}

t.test('a feed held before it ever published: 503 naming the guard, stale pollers, accept within a second', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  const store = await openStore({ kind: 'embedded', dataDir: f.dir })
  const list = await store.lists.create({ workspaceId: f.workspaceId, name: 'guarded', description: '', defaults: { guards: { minEntries: 5 } }, selector: {} })
  await store.close()
  // The default rebuild interval: the failure backoff grows towards it.
  const { server } = await start(serverEnv(f.dir, { THREATFEED_FEED_REBUILD_MS: '30000' }))
  t.teardown(() => server.stop())
  const base = `http://127.0.0.1:${server.port}`
  const auth = { authorization: `Bearer ${f.key}` }
  const posted = await fetch(`${base}/v1/signal`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(['198.51.100.1', '198.51.100.3'].map((ip) => ({ type: 'access_rules', action: 'block', ip }))) })
  t.equal(posted.status, 200, await posted.text())

  const url = `${base}/v1/threat/feeds/${list.id}`
  const accept = `threatfeed list accept --id ${list.id}`
  for (let i = 0; i < 3; i++) {
    const t0 = Date.now()
    const r = await fetch(url, { headers: { ...auth, 'user-agent': 'held-poller' } })
    const ms = Date.now() - t0
    t.equal(r.status, 503, `poll ${i + 1}: 503`)
    t.equal(r.headers.get('x-feed-held'), 'min_entries')
    t.equal(r.headers.get('retry-after'), '10')
    const body = await r.json() as { success: boolean, error: string, details: { held: string, digest: string, accept: string } }
    t.match(body, { success: false, error: `feed held by publish guard min_entries before it ever published; publish the held build with \`${accept}\``, details: { held: 'min_entries', digest: /^[0-9a-f]+$/, accept } })
    // The first build is waited for; after it, the answer is at once (it waited the 10 s await).
    if (i > 0) t.ok(ms < 3000, `poll ${i + 1} answered in ${ms} ms`)
  }
  const head = await fetch(url, { method: 'HEAD', headers: auth })
  t.equal(head.status, 503, 'HEAD: 503')
  t.equal(head.headers.get('x-feed-held'), 'min_entries', 'HEAD: X-Feed-Held')
  t.equal(head.headers.get('retry-after'), '10', 'HEAD: Retry-After')

  // Three 503s and never a 200: stale, failing.
  const rows = await eventually(() => consumersLs(f.dir), (rs) => rs.some((r) => r.user_agent === 'held-poller' && r.stale))
  t.match(rows.find((r) => r.user_agent === 'held-poller'), { stale: true, stale_reason: 'failing', last_status: 503, last_200: null, polls: { total: 3, server_errors: 3, ok: 0 } })

  const accepted = await cli(f.dir, ['list', 'accept', '--id', list.id])
  const acceptedAt = Date.now()
  t.equal(accepted.code, 0, accepted.stderr)
  t.match(accepted.stdout, new RegExp(`^accepted build [0-9a-f]+ of list ${list.id}; the server publishes it within a second\\n$`))
  const published = await eventually(() => fetch(url, { headers: auth }).then(async (r) => ({ status: r.status, body: await r.text() })), (r) => r.status === 200, 15_000)
  const ms = Date.now() - acceptedAt
  t.equal(published.status, 200)
  t.equal(published.body, '198.51.100.1/32\n198.51.100.3/32\n')
  // A second, as documented, with room for a loaded machine (it took 7 s before).
  t.ok(ms < 2500, `published ${ms} ms after the accept`)

  const again = await cli(f.dir, ['list', 'accept', '--id', list.id])
  t.equal(again.code, 0, again.stderr)
  t.match(again.stdout, `was already accepted; nothing to do`)
  const json = await cli(f.dir, ['list', 'accept', '--id', list.id, '--json'])
  t.match(JSON.parse(json.stdout), { id: list.id, accepted: /^[0-9a-f]+$/, already_accepted: true })
})
