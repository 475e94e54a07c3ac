/**
 * Feed consumers across processes and restarts (issue 20): two servers on one store merge their
 * views of a consumer, the table survives a restart, and a consumer unseen for 30 days is
 * forgotten.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { openStore } from '../../src/store/open.js'
import { consumerId, emptyTally } from '../../src/store/consumer-record.js'
import { consumersLs, eventually, makeFixture, poll, serverEnv, start, storedConsumers } from '../helpers/consumers.js'

/** `threatfeed serve` as a process of its own; resolves once it listens. */
async function spawnServer (env: Record<string, string>): Promise<{ port: number, stop: () => Promise<number | null> }> {
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const lines = createInterface({ input: child.stdout })
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no "listening" log line within 60 s')), 60_000)
    lines.on('line', (line) => {
      const rec = JSON.parse(line) as Record<string, unknown>
      if (rec.msg === 'listening') { clearTimeout(timer); resolve(rec.port as number) }
    })
  })
  return { port, stop: async () => { child.kill('SIGTERM'); return exited } }
}

t.test('two server processes on one store merge their views of a consumer', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  const env = serverEnv(f.dir, { THREATFEED_CONSUMER_STALE: '1h' })
  const { server } = await start(env)
  t.teardown(() => server.stop())
  const other = await spawnServer({ ...env, THREATFEED_LOG_LEVEL: 'info' })
  t.teardown(() => other.stop())
  // The feed's first build on each node, out of the way (a loaded machine can outlast a poll's wait).
  for (const port of [server.port, other.port]) await eventually(() => poll(port, { key: f.key, userAgent: 'warm-up', from: '127.0.0.8' }), (r) => r.status === 200, 60_000)
  // One appliance behind a balancer: its polls alternate between the two nodes.
  const first = await poll(server.port, { key: f.key, userAgent: 'balanced' })
  t.equal(first.status, 200)
  for (let i = 0; i < 5; i++) {
    const port = i % 2 === 0 ? other.port : server.port
    t.equal((await poll(port, { key: f.key, userAgent: 'balanced', ifNoneMatch: first.etag })).status, 304)
  }
  // Another one polls the second node only.
  t.equal((await poll(other.port, { key: f.key, userAgent: 'only-b', from: '127.0.0.9' })).status, 200)
  await storedConsumers(server, (c) => c.length === 3 && c.filter((x) => x.userAgent !== 'warm-up').reduce((n, x) => n + x.polls, 0) === 7)
  const rows = (await consumersLs(f.dir, ['--stale', '1h'])).filter((r) => r.user_agent !== 'warm-up')
  t.equal(rows.length, 2)
  t.match(rows.find((x) => x.user_agent === 'balanced'), { address: '127.0.0.1', last_status: 304, behind: false, polls: { total: 6, ok: 1, not_modified: 5 } }, 'both nodes\' polls in one record')
  t.match(rows.find((x) => x.user_agent === 'only-b'), { address: '127.0.0.9', polls: { total: 1, ok: 1 } })
  t.equal(await other.stop(), 0)
})

t.test('the consumer table survives a restart; a consumer unseen for 30 days is forgotten', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  const env = serverEnv(f.dir, { THREATFEED_CONSUMER_STALE: '1h' })
  let { server } = await start(env)
  // The feed's first build, out of the way: on a loaded machine it can outlast a poll's 10 s wait.
  await eventually(() => poll(server.port, { key: f.key, userAgent: 'warm-up' }), (r) => r.status === 200, 60_000)
  t.equal((await poll(server.port, { key: f.key, userAgent: 'survivor' })).status, 200)
  t.equal((await poll(server.port, { key: f.key, userAgent: 'survivor' })).status, 200)
  // Stopping writes what was counted since the last flush.
  await server.stop()
  let rows = (await consumersLs(f.dir, ['--stale', '1h'])).filter((r) => r.user_agent !== 'warm-up')
  t.match(rows, [{ user_agent: 'survivor', polls: { total: 2, ok: 2 } }])

  // A consumer last seen 31 days ago (as a store left alone that long would hold it).
  const store = await openStore({ kind: 'embedded', dataDir: f.dir })
  const longAgo = Date.now() - 31 * 86_400_000
  const identity = { workspaceId: f.workspaceId, keyId: 'gone-key', address: '192.0.2.200', userAgent: 'retired', client: '', listId: '*', variant: 'plain|both|block|' }
  await store.consumers.merge([{ id: consumerId(identity), ...identity, family: 'both', action: 'block', ...emptyTally(longAgo), polls: 1, ok: 1, last: { at: longAgo, status: 200 } }])
  t.equal((await store.consumers.list()).length, 3)
  await store.close()

  ;({ server } = await start(env))
  t.teardown(() => server.stop())
  t.equal((await poll(server.port, { key: f.key, userAgent: 'survivor' })).status, 200)
  const left = await storedConsumers(server, (c) => c.length === 2 && c.some((x) => x.userAgent === 'survivor' && x.polls === 3))
  t.same(left.map((c) => c.userAgent).sort(), ['survivor', 'warm-up'], 'the server forgot the consumer unseen for 30 days')
  rows = (await consumersLs(f.dir, ['--stale', '1h'])).filter((r) => r.user_agent !== 'warm-up')
  t.match(rows, [{ user_agent: 'survivor', polls: { total: 3, ok: 3 } }], 'counts go on from the stored ones')
})
