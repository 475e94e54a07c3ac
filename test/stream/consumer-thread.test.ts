/**
 * The consumer on a thread of its own (the server's default for the embedded store), through
 * HTTP: what is acknowledged is applied, a thread that dies is started again and loses nothing,
 * a restart catches up with what was accepted before it, and stopping the thread leaves the
 * server's own handle on the store working.
 */
import t from 'tap'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SWEEP_GRAIN_MS, type AccessRule } from '../../src/store/types.js'
import { accessInput, ip } from '../store/contract-fixtures.js'
import type { ThreadedConsumer } from '../../src/stream/consumer-thread.js'
import { post, startTestServer, type TestServer } from '../helpers/server.js'

const blocks = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ type: 'access_rules', action: 'block', ip: `10.${(from + i) >> 16 & 255}.${(from + i) >> 8 & 255}.${(from + i) & 255}` }))
const accessRules = async (srv: TestServer) => (await srv.store.rules.list(srv.workspace.id, 'access_rule', Date.now())) as AccessRule[]
const settle = async (srv: TestServer, ms = 5000) => srv.consumer.waitFor(await srv.store.stream.head(), ms)

t.test('acknowledged batches are applied by the thread, and the position comes back', async (t) => {
  const srv = await startTestServer({ consumerThread: true })
  t.teardown(() => srv.close())
  for (let b = 0; b < 5; b++) t.equal((await post(srv, 'v1', blocks(b * 200, 200))).status, 200)
  t.equal(await settle(srv), true, 'waitFor resolves once the thread reports the head')
  t.equal(srv.consumer.position, await srv.store.stream.head())
  t.equal(srv.consumer.backlog, 0)
  t.equal((await accessRules(srv)).length, 1000)
  t.equal(await srv.store.stream.getCheckpoint('rules'), 1000, 'the checkpoint moved with the rules')
})

t.test('commands of every kind cross to the thread intact: the same rules as applying them in this thread', async (t) => {
  const threaded = await startTestServer({ consumerThread: true, asnExists: () => true })
  const inline = await startTestServer({ asnExists: () => true })
  t.teardown(async () => { await threaded.close(); await inline.close() })
  const v2 = [
    { kind: 'access_rule', op: 'upsert', rule_ref: 'a1', rule: { target: { ip: '192.0.2.0/24' }, action: 'allow' }, labels: { team: 'red', n: 3, on: true, confidence: 'high', severity: 'low' }, reason: 'why', expires_in: 3600 },
    { kind: 'access_rule', op: 'upsert', rule_ref: 'a2', rule: { target: { country: 'DE' } } },
    { kind: 'access_rule', op: 'upsert', rule: { target: { asn: 'AS64512' } } },
    { kind: 'waf_rule', op: 'upsert', rule_ref: 'w1', rule: { name: 'w', type: 'custom', expression: 'http.host eq "x"', action: 'block', phase: 'request' } },
    { kind: 'smart_firewall_rule', op: 'upsert', rule_ref: 's1', rule: { type: 'generated', expression: 'ip.src in {192.0.2.0/24}', action: 'block' } },
    { kind: 'access_rule', op: 'delete', rule_ref: 'a2' },
    { kind: 'waf_rule', op: 'delete', rule_ref: 'nope' },
  ]
  const v1 = [
    { type: 'access_rules', action: 'block', ip: '198.51.100.7', name: 'scanner', expiration: 60 },
    { type: 'access_rules', action: 'unblock', asn: 'AS64512' },
  ]
  // Everything but what differs between two servers: ids, workspace, times (expiry counts from acceptance).
  const comparable = (rules: unknown[]) => rules.map((r) => {
    const { id: _i, createdAt: _c, updatedAt: _u, workspaceId: _w, expiresAt, ...rest } = r as Record<string, unknown>
    return { ...rest, expires: expiresAt !== null }
  })
  const results = []
  for (const srv of [threaded, inline]) {
    for (const [api, body] of [['v2', v2], ['v1', v1]] as const) {
      const r = await post(srv, api, body)
      t.equal(r.status, 200, JSON.stringify(r.body))
    }
    t.equal(await settle(srv), true)
    const out: unknown[] = []
    for (const kind of ['access_rule', 'waf_rule', 'smart_firewall_rule'] as const) out.push(...comparable(await srv.store.rules.list(srv.workspace.id, kind)))
    results.push(out)
  }
  t.equal(results[0]!.length, 4, 'a1 and the v1 address; w1; s1 (a2 deleted, the ASN rule unblocked)')
  t.same(results[0], results[1])
})

t.test('a thread that dies is started again; what was accepted meanwhile is applied once', async (t) => {
  const srv = await startTestServer({ consumerThread: true })
  t.teardown(() => srv.close())
  const consumer = srv.consumer as ThreadedConsumer
  t.equal((await post(srv, 'v1', blocks(0, 500))).status, 200)
  t.equal(await settle(srv), true)
  await consumer.kill()
  // Accepted while no thread runs: durable on the stream, counted in the backlog.
  t.equal((await post(srv, 'v1', blocks(500, 500))).status, 200)
  t.equal(consumer.backlog, 500)
  t.equal(await settle(srv, 8000), true, 'the new thread applied the rest')
  t.equal(consumer.restarts, 1)
  t.equal((await accessRules(srv)).length, 1000)
  t.equal(await srv.store.stream.getCheckpoint('rules'), 1000)
})

t.test('a restart catches up with what was accepted while nothing applied it', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tf-thread-'))
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
  const first = await startTestServer({ consumer: false, dataDir })
  t.equal((await post(first, 'v1', blocks(0, 800))).status, 200)
  t.equal(first.consumer.backlog, 800)
  await first.close()
  const again = await startTestServer({ consumerThread: true, dataDir, provision: false })
  t.teardown(() => again.close())
  t.equal(again.consumer.position, 800, 'start() resolves once the thread has caught up')
  t.equal((await again.store.rules.list(first.workspace.id, 'access_rule', Date.now())).length, 800)
})

t.test('stopping the thread leaves the server\'s own handle on the store open', async (t) => {
  const srv = await startTestServer({ consumerThread: true })
  t.teardown(() => srv.close())
  t.equal((await post(srv, 'v1', blocks(0, 10))).status, 200)
  t.equal(await settle(srv), true)
  await srv.consumer.stop()
  t.equal((await accessRules(srv)).length, 10, 'reads still work')
  t.equal((await post(srv, 'v1', blocks(10, 10))).status, 200, 'appends still work')
  t.equal(srv.consumer.backlog, 10, 'and wait for a consumer')
})

t.test('setSweep: the thread sweeps lapsed rules itself, and again after it was started again', async (t) => {
  const srv = await startTestServer({ consumerThread: true })
  t.teardown(() => srv.close())
  const consumer = srv.consumer as ThreadedConsumer
  const ws = srv.workspace.id
  const expiresAt = Math.floor(Date.now() / SWEEP_GRAIN_MS) * SWEEP_GRAIN_MS - 1
  const lapse = async (from: number): Promise<void> => {
    await srv.store.applyRuleBatch({ ops: blocks(from, 20).map((b) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: ip(`${b.ip}/32`), expiresAt }) })) })
  }
  const stored = async (): Promise<number> => (await srv.store.rules.list(ws, 'access_rule')).filter((r) => r.expiresAt === expiresAt).length
  const waitEmpty = async (): Promise<number> => {
    for (let i = 0; i < 200 && await stored() > 0; i++) await new Promise((resolve) => setTimeout(resolve, 25))
    return stored()
  }
  await lapse(0)
  consumer.setSweep(5)
  t.equal(await waitEmpty(), 0, 'the lapsed rules swept by the thread')
  await consumer.kill()
  for (let i = 0; i < 200 && consumer.restarts === 0; i++) await new Promise((resolve) => setTimeout(resolve, 25))
  await lapse(100)
  t.equal((await post(srv, 'v1', blocks(500, 1))).status, 200)
  t.equal(await settle(srv, 10_000), true)
  t.equal(await waitEmpty(), 0, 'the thread started again sweeps too')
})

t.test('the thread gets the parent\'s node flags without its module loaders', async (t) => {
  const { withoutLoaders } = await import('../../src/threads/entry.js')
  const cases: Array<[string[], string[]]> = [
    [[], []],
    [['--import=tsx', '--cpu-prof'], ['--cpu-prof']],
    [['--import', 'tsx', '--max-old-space-size=512'], ['--max-old-space-size=512']],
    [['--loader', 'x', '--experimental-loader=y', '-r', 'z', '--require=w', '--enable-source-maps'], ['--enable-source-maps']],
    [['--imports-are-not-loaders', '--cpu-prof-dir=/tmp'], ['--imports-are-not-loaders', '--cpu-prof-dir=/tmp']],
  ]
  for (const [given, expected] of cases) t.same(withoutLoaders(given), expected, given.join(' '))
})

t.test('flags a thread cannot take (the whole process\'s) are left out of its execArgv', async (t) => {
  const { threadWithFlags } = await import('../../src/stream/consumer-thread.js')
  const dir = mkdtempSync(join(tmpdir(), 'tf-flags-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'echo.mjs')
  writeFileSync(file, "import { parentPort } from 'node:worker_threads'\nparentPort.postMessage(process.execArgv)\n")
  const cases: Array<[string[], string[]]> = [
    [[], []],
    [['--enable-source-maps', '--no-warnings'], ['--enable-source-maps', '--no-warnings']],
    [['--trace-gc', '--enable-source-maps'], ['--enable-source-maps']],
    [['--max-old-space-size=512', '--stack-size=2000', '--expose-gc'], []],
  ]
  for (const [given, expected] of cases) {
    const worker = threadWithFlags(file, null, given)
    const [argv] = await once(worker, 'message') as [string[]]
    await once(worker, 'exit')
    t.same(argv, expected, given.join(' '))
  }
})

