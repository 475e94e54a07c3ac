import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../../src/store/open.js'
import type { BatchingStore } from '../../src/store/batch-types.js'
import { SWEEP_GRAIN_MS, type AccessRule, type StreamRecordInput, type SweepPass } from '../../src/store/types.js'
import { StreamConsumer } from '../../src/stream/consumer.js'
import { accessInput, ip } from '../store/contract-fixtures.js'

async function withStore (t: Test): Promise<BatchingStore> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-consumer-'))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) })
  return store
}

const T0 = 1_700_000_000_000
const v1 = (workspaceId: string, payload: string, acceptedAt = T0): StreamRecordInput => ({ workspaceId, payload, acceptedAt })
const v2 = (workspaceId: string, payload: unknown, acceptedAt = T0): StreamRecordInput => ({ workspaceId, schemaVersion: 2, payload: JSON.stringify(payload), acceptedAt })
const access = async (store: BatchingStore, ws: string) => (await store.rules.list(ws, 'access_rule')) as AccessRule[]


/** The store, its first `n` applyRuleBatch calls failing with `message`. */
function failingApplies (store: BatchingStore, n: number, message: string): BatchingStore {
  let failures = n
  return new Proxy(store, {
    get (target, prop, receiver) {
      if (prop === 'applyRuleBatch') {
        return async (batch: Parameters<BatchingStore['applyRuleBatch']>[0]) => {
          if (failures-- > 0) throw new Error(message)
          return target.applyRuleBatch(batch)
        }
      }
      return Reflect.get(target, prop, receiver) as unknown
    },
  })
}

t.test('dispatches on the schema_version header and applies in order', async (t) => {
  const store = await withStore(t)
  const consumer = new StreamConsumer(store, { pollMs: 1000 })
  const warnings: unknown[] = []
  const logged = new StreamConsumer(store, { pollMs: 1000, name: 'other', log: { warn: (o: unknown) => { warnings.push(o) }, error: () => {} } as never })
  await store.stream.append([
    v1('w', '{"type":"access_rules","action":"block","ip":"10.0.0.1/8","expiration":30}'), // 1: legacy, no header
    { ...v1('w', '{"type":"access_rules","action":"block","country":"de","name":"n"}'), schemaVersion: 1 }, // 2: header 1 = legacy
    v2('w', { schema_version: 2, kind: 'access_rule', op: 'upsert', rule_ref: 'k1', expires_in: 0, rule: { target: { asn: 'AS64512' }, action: 'allow' } }), // 3
    v2('w', { schema_version: 2, kind: 'waf_rule', op: 'upsert', rule_ref: 'w1', expires_in: 120, rule: { name: 'w1', type: 'custom', expression: 'not valid at all', action: 'block' } }), // 4: not re-checked
    { ...v1('w', '{}'), schemaVersion: 3 }, // 5: unknown header → skipped
    v1('w', 'not json'), // 6: corrupt → skipped
    v1('w', '{"type":"access_rules","action":"unblock","country":"DE"}'), // 7
  ])
  await consumer.start()
  t.teardown(() => consumer.stop())
  t.equal(consumer.position, 7)
  t.equal(await store.stream.getCheckpoint('rules'), 7)
  const rules = await access(store, 'w')
  t.same(rules.map((r) => [r.target.value, r.action, r.ruleRef, r.expiresAt, r.seq]).sort(), [
    ['10.0.0.0/8', 'block', null, T0 + 60_000, 1],
    ['AS64512', 'allow', 'k1', null, 3],
  ], 'expiry from acceptedAt; the unblock removed DE')
  const waf = await store.rules.list('w', 'waf_rule')
  t.match(waf, [{ ruleRef: 'w1', expression: 'not valid at all', expiresAt: T0 + 120_000, seq: 4 }])

  await logged.start()
  t.teardown(() => logged.stop())
  t.same(warnings, [{ seq: 5, reason: 'unknown schema_version 3' }, { seq: 6, reason: 'payload is not JSON' }])
})

t.test('resumes from its checkpoint, and re-application is idempotent', async (t) => {
  const store = await withStore(t)
  const block = (ip: string) => v1('w', `{"type":"access_rules","action":"block","ip":"${ip}"}`)
  await store.stream.append([block('192.0.2.1'), block('192.0.2.2')])
  const first = new StreamConsumer(store, { pollMs: 1000 })
  await first.start()
  await first.stop()
  const before = await access(store, 'w')
  t.equal(before.length, 2)

  await store.stream.append([block('192.0.2.3'), v1('w', '{"type":"access_rules","action":"unblock","ip":"192.0.2.1"}')])
  const second = new StreamConsumer(store, { pollMs: 1000, batchSize: 1 })
  await second.start()
  await second.stop()
  t.equal(second.position, 4)
  t.same((await access(store, 'w')).map((r) => r.target.value).sort(), ['192.0.2.2/32', '192.0.2.3/32'])

  // Replaying the whole stream again (a lost checkpoint) gives the same rules, no duplicates.
  const snapshot = (rules: AccessRule[]) => rules.map((r) => ({ id: r.id, target: r.target, expiresAt: r.expiresAt, createdAt: r.createdAt })).sort((a, b) => a.target.value.localeCompare(b.target.value))
  const applied = snapshot(await access(store, 'w'))
  await store.stream.setCheckpoint('rules', 0)
  const replay = new StreamConsumer(store, { pollMs: 1000 })
  await replay.start()
  await replay.stop()
  t.same(snapshot(await access(store, 'w')), applied)
})

t.test('polls for records appended elsewhere; waitFor resolves or times out', async (t) => {
  const store = await withStore(t)
  const consumer = new StreamConsumer(store, { pollMs: 30 })
  await consumer.start()
  t.teardown(() => consumer.stop())
  t.equal(await consumer.waitFor(1, 20), false, 'times out when nothing comes')
  const [seq] = await store.stream.append([v1('w', '{"type":"access_rules","action":"block","asn":"AS3"}')])
  t.equal(await consumer.waitFor(seq!, 30_000), true, 'no nudge: the poll finds it')
  t.equal(await consumer.waitFor(seq!, 0), true, 'already applied')
  t.equal((await access(store, 'w')).length, 1)
})

t.test('a failing store is retried on the next poll; nothing is skipped', async (t) => {
  const store = await withStore(t)
  const errors: unknown[] = []
  const flaky = failingApplies(store, 1, 'disk on fire')
  const consumer = new StreamConsumer(flaky, { pollMs: 30, log: { warn: () => {}, error: (o: unknown) => { errors.push(o) } } as never })
  await store.stream.append([v1('w', '{"type":"access_rules","action":"block","ip":"198.51.100.7"}')])
  await consumer.start()
  t.teardown(() => consumer.stop())
  t.equal(consumer.position, 0, 'the first pass failed')
  t.equal(await consumer.waitFor(1, 30_000), true)
  t.equal(errors.length, 1)
  t.equal((await access(store, 'w')).length, 1)
})

t.test('records handed over by the ingester are applied from memory, others read from the store, in order', async (t) => {
  const { SignalIngester } = await import('../../src/ingest/batch.js')
  const store = await withStore(t)
  let readBack = 0
  const counting = new Proxy(store, {
    get (target, prop, receiver) {
      if (prop === 'stream') {
        return new Proxy(target.stream, {
          get (s, p, r) {
            if (p === 'read') return async (from: number, limit: number) => { const out = await s.read(from, limit); readBack += out.length; return out }
            const v = Reflect.get(s, p, r) as unknown
            return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(s) : v
          },
        })
      }
      return Reflect.get(target, prop, receiver) as unknown
    },
  })
  const consumer = new StreamConsumer(counting, { pollMs: 10_000 })
  await consumer.start()
  t.teardown(() => consumer.stop())
  const ingester = new SignalIngester({ stream: store.stream, checks: { asnExists: null, checkExpressions: true }, onAppended: (b) => { consumer.offer(b) } })
  const body = (entries: unknown[]) => Buffer.from(JSON.stringify(entries))

  const a = await ingester.ingest('v1', 'w', body([{ type: 'access_rules', action: 'block', ip: '192.0.2.1' }, { type: 'access_rules', action: 'block', country: 'fr' }]))
  t.ok(await consumer.waitFor(a.seqs.at(-1)!, 30_000))
  t.equal(readBack, 0, 'nothing read back')

  // Another process appends (no offer), then this one again: the gap is read from the store.
  await store.stream.append([v1('w', '{"type":"access_rules","action":"unblock","ip":"192.0.2.1"}')])
  const c = await ingester.ingest('v2', 'w', body([{ kind: 'access_rule', op: 'upsert', rule_ref: 'r', rule: { target: { ip: '192.0.2.1' }, action: 'allow' } }]))
  t.ok(await consumer.waitFor(c.seqs.at(-1)!, 30_000))
  t.equal(readBack, 1, 'the foreign record alone: the read stops at the offered batch after it')
  const rules = (await access(store, 'w')).map((r) => [r.target.value, r.ruleRef, r.action]).sort()
  t.same(rules, [['192.0.2.1/32', 'r', 'allow'], ['FR', null, 'block']], 'the same rules as a replay from the store')

  // Replaying everything from the store gives the same rules (ids aside: the replayed unblock
  // removes the keyed rule before its upsert is replayed).
  const view = (rules: Awaited<ReturnType<typeof access>>) => rules.map((r) => ({ ref: r.ruleRef, target: r.target, action: r.action, expiresAt: r.expiresAt, seq: r.seq })).sort((x, y) => x.seq - y.seq)
  const before = view(await access(store, 'w'))
  await store.stream.setCheckpoint('rules', 0)
  const replay = new StreamConsumer(store, { pollMs: 10_000 })
  await replay.start()
  await replay.stop()
  t.same(view(await access(store, 'w')), before)
})

t.test('two consumers of one name race over one stream: every record applied once, in order', async (t) => {
  const { SignalIngester } = await import('../../src/ingest/batch.js')
  const store = await withStore(t)
  // Records that only give the right rules in order: blocks with expiries that each later record
  // of a target replaces, and unblocks between them.
  const records: StreamRecordInput[] = []
  for (let i = 0; i < 600; i++) {
    const ip = `192.0.2.${i % 23}`
    records.push(i % 7 === 6
      ? v1('w', `{"type":"access_rules","action":"unblock","ip":"${ip}"}`)
      : v1('w', `{"type":"access_rules","action":"block","ip":"${ip}","expiration":${60 + i}}`))
  }
  let appliedOps = 0
  let conflicts = 0
  const counting = new Proxy(store, {
    get (target, prop, receiver) {
      if (prop === 'applyRuleBatch') {
        return async (batch: Parameters<BatchingStore['applyRuleBatch']>[0]) => {
          const r = await target.applyRuleBatch(batch)
          if (r.applied) appliedOps += batch.ops.length
          else conflicts++
          return r
        }
      }
      return Reflect.get(target, prop, receiver) as unknown
    },
  })
  const a = new StreamConsumer(counting, { pollMs: 5, batchSize: 17, lease: false })
  const b = new StreamConsumer(counting, { pollMs: 5, batchSize: 29, lease: false })
  await Promise.all([a.start(), b.start()])
  t.teardown(async () => { await a.stop(); await b.stop() })
  // Half the batches come through an ingester that hands them to `a` in memory (as a server's
  // own appends do); `b` reads everything from the store. Whoever applies a slice first wins it.
  const ingester = new SignalIngester({ stream: store.stream, checks: { asnExists: null, checkExpressions: true }, onAppended: (batch) => { a.offer(batch); b.poll() } })
  for (let i = 0; i < records.length; i += 50) {
    const slice = records.slice(i, i + 50)
    if ((i / 50) % 2 === 0) await ingester.ingest('v1', 'w', Buffer.from(`[${slice.map((r) => r.payload).join(',')}]`))
    else {
      await store.stream.append(slice)
      a.poll()
      b.poll()
    }
  }
  const head = await store.stream.head()
  t.ok(await a.waitFor(head, 30_000) && await b.waitFor(head, 30_000), 'both reach the head')
  t.equal(appliedOps, records.length, 'every record applied exactly once')
  t.equal(await store.stream.getCheckpoint('rules'), head)
  t.comment(`${conflicts} passes lost the race and re-read`)

  // The rules one consumer alone makes, replaying the same stream into a second store.
  const alone = await withStore(t)
  await alone.stream.append((await store.stream.read(1, head)).map(({ seq: _seq, ...r }) => r))
  const single = new StreamConsumer(alone, { pollMs: 1000 })
  await single.start()
  await single.stop()
  const view = (rules: AccessRule[]) => rules.map((r) => [r.target.value, r.expiresAt, r.seq]).sort()
  t.same(view(await access(store, 'w')), view(await access(alone, 'w')), 'the same rules as a single consumer')
})

t.test('gatherMs: a few records wait for more, up to a full pass or the deadline', async (t) => {
  const { SignalIngester } = await import('../../src/ingest/batch.js')
  const store = await withStore(t)
  const passes: number[] = []
  const counting = new Proxy(store, {
    get (target, prop, receiver) {
      if (prop === 'applyRuleBatch') return (batch: Parameters<BatchingStore['applyRuleBatch']>[0]) => { passes.push(batch.ops.length); return target.applyRuleBatch(batch) }
      const v = Reflect.get(target, prop, receiver) as unknown
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
  // A deadline far above what three durable appends take on a loaded machine, so that a pass that
  // did not wait for it is told apart from one that did by a wide margin.
  const GATHER_MS = 4000
  const consumer = new StreamConsumer(counting, { pollMs: 3_600_000, batchSize: 6, gatherMs: GATHER_MS })
  await consumer.start()
  t.teardown(() => consumer.stop())
  // Appended batches are offered when the test says, all in one tick: how long three durable
  // appends take on a loaded machine is then no part of the gather (the consumer reads the store
  // only on its poll timer, an hour away).
  const appended: Parameters<StreamConsumer['offer']>[0][] = []
  const offerAll = (): void => { for (const b of appended.splice(0)) consumer.offer(b) }
  const ingester = new SignalIngester({ stream: store.stream, checks: { asnExists: null, checkExpressions: true }, onAppended: (b) => { appended.push(b) } })
  const two = (n: number) => Buffer.from(JSON.stringify([0, 1].map((i) => ({ type: 'access_rules', action: 'block', ip: `192.0.2.${n * 2 + i}` }))))

  // Three batches of two fill a pass of six: applied together, before the deadline.
  let last = 0
  for (let n = 0; n < 3; n++) last = (await ingester.ingest('v1', 'w', two(n))).seqs.at(-1)!
  const t0 = performance.now()
  offerAll()
  t.ok(await consumer.waitFor(last, GATHER_MS * 2))
  t.same(passes, [6], 'one pass for the three batches')
  t.ok(performance.now() - t0 < GATHER_MS * 0.75, 'without waiting for the deadline')

  // One batch alone is applied once the deadline passes.
  last = (await ingester.ingest('v1', 'w', two(3))).seqs.at(-1)!
  const t1 = performance.now()
  offerAll()
  t.ok(await consumer.waitFor(last, GATHER_MS * 2))
  t.same(passes, [6, 2])
  t.ok(performance.now() - t1 >= GATHER_MS * 0.9, 'after waiting for more')
  t.equal((await access(store, 'w')).length, 8)
})

t.test('a packed batch whose apply failed is applied whole when retried (read again from its start)', async (t) => {
  const { packBatch, commandFromText } = await import('../../src/stream/packed-batch.js')
  const { EmbeddedBatchPacker, unpackBatch } = await import('../../src/store/embedded/packed-batch.js')
  const store = await withStore(t)
  const errors: unknown[] = []
  const flaky = failingApplies(store, 2, 'MDB_MAP_FULL')
  const consumer = new StreamConsumer(flaky, { pollMs: 30, log: { warn: () => {}, error: (o: unknown) => { errors.push(o) } } as never })
  await consumer.start()
  t.teardown(() => consumer.stop())
  const ips = ['198.51.100.1', '198.51.100.2', '198.51.100.3']
  const seqs = await store.stream.append(ips.map((ip) => v1('w', `{"type":"access_rules","action":"block","ip":"${ip}"}`)))
  const access1 = (ip: string) => ({ kind: 'access_rule', op: 'upsert', ruleRef: null, target: { type: 'ip', value: `${ip}/32` }, action: 'block', name: null, reason: null, labels: {}, confidence: null, severity: null, expiresIn: null }) as const
  const packed = packBatch(new EmbeddedBatchPacker(), { workspaceId: 'w', acceptedAt: T0, seqs, commands: ips.map(access1) })
  t.not(packed, null)
  consumer.offerPrepared(unpackBatch(packed!, commandFromText))
  t.equal(await consumer.waitFor(seqs.at(-1)!, 30_000), true, 'applied after two failed passes')
  t.equal(errors.length, 2, 'each failure logged once')
  t.notMatch(JSON.stringify(errors.map((e) => String((e as { err?: Error }).err))), /ends early/, 'no retry read the batch from its end')
  t.same((await access(store, 'w')).map((r) => r.target.value).sort(), ips.map((ip) => `${ip}/32`))
})

/** Rules of `ws` that lapsed before the current sweep grain, in `batches` transactions of `n`. */
async function lapsedRules (store: BatchingStore, ws: string, batches: number, n: number): Promise<void> {
  const expiresAt = Math.floor(Date.now() / SWEEP_GRAIN_MS) * SWEEP_GRAIN_MS - 1
  for (let b = 0; b < batches; b++) {
    await store.applyRuleBatch({ ops: Array.from({ length: n }, (_, i) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: ip(`10.3.${b}.${i}/32`), expiresAt }) })) })
  }
}

/** The store, with every applyRuleBatch call's batch recorded (and the first `fail` that carry a sweep failing). */
function watchedApplies (store: BatchingStore, fail = 0): { store: BatchingStore, batches: Array<Parameters<BatchingStore['applyRuleBatch']>[0]> } {
  const batches: Array<Parameters<BatchingStore['applyRuleBatch']>[0]> = []
  let failures = fail
  return {
    batches,
    store: new Proxy(store, {
      get (target, prop, receiver) {
        if (prop === 'applyRuleBatch') {
          return async (batch: Parameters<BatchingStore['applyRuleBatch']>[0]) => {
            batches.push(batch)
            if (batch.sweep !== undefined && failures-- > 0) throw new Error('sweep on fire')
            return target.applyRuleBatch(batch)
          }
        }
        return Reflect.get(target, prop, receiver) as unknown
      },
    }),
  }
}

t.test('setSweep: lapsed rules are swept in the apply\'s transaction, in passes of its own while idle, and not after setSweep(null)', async (t) => {
  const raw = await withStore(t)
  const { store, batches } = watchedApplies(raw)
  const passes: SweepPass[] = []
  // No poll timer: each consumer reads the stream only when told (poll) or nudged (setSweep, its
  // own sweep pauses).
  const opts = { pollMs: 3_600_000, onSwept: (p: SweepPass) => { passes.push(p) } }
  const idle = new StreamConsumer(store, opts)
  await idle.start()
  t.teardown(() => idle.stop())
  await lapsedRules(raw, 'idle', 4, 10)
  idle.setSweep(15)
  // Until the passes are counted: a read can see a pass's commit before the consumer has heard of it.
  const removed = (): number => passes.reduce((n, p) => n + p.removed, 0)
  for (let i = 0; i < 500 && ((await access(raw, 'idle')).length > 0 || removed() < 40); i++) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal((await access(raw, 'idle')).length, 0, 'swept while nothing was applied')
  t.ok(passes.length >= 2, `in bounded passes (${passes.length})`)
  t.equal(removed(), 40)
  await idle.stop()

  // A pass of records carries the sweep (setSweep makes one due at once). A consumer of its own,
  // started with nothing to do, so that nothing wakes it but poll() and setSweep(): the record is
  // read only after both (an idle consumer's pause timer could otherwise wake a pass that reads
  // the record as soon as its commit lands — before setSweep — and apply it without a sweep).
  const consumer = new StreamConsumer(store, opts)
  await consumer.start()
  t.teardown(() => consumer.stop())
  await lapsedRules(raw, 'busy', 1, 5)
  const [seq] = await store.stream.append([v1('busy', '{"type":"access_rules","action":"block","ip":"198.51.100.9"}')])
  consumer.poll()
  consumer.setSweep(15)
  t.equal(await consumer.waitFor(seq!, 5000), true)
  const applied = batches.filter((b) => b.checkpoint !== undefined)
  t.match(applied.at(-1), { sweep: { now: Number, limit: 15, scrub: true } }, 'the apply asked for a sweep, scrubbing with what its lapses leave')
  t.same((await access(raw, 'busy')).map((r) => r.target.value), ['198.51.100.9/32'], 'swept in that transaction')

  consumer.setSweep(null)
  await lapsedRules(raw, 'off', 1, 5)
  const [seq2] = await store.stream.append([v1('off', '{"type":"access_rules","action":"block","ip":"198.51.100.10"}')])
  consumer.poll()
  t.equal(await consumer.waitFor(seq2!, 5000), true)
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(batches.at(-1)!.sweep, undefined, 'no sweep asked for')
  t.equal((await access(raw, 'off')).length, 6, 'nothing swept')
})

t.test('a pass with records waiting behind it sweeps lapses and does not scrub; the pass after it, with none behind, may', async (t) => {
  const raw = await withStore(t)
  const { store, batches } = watchedApplies(raw)
  // Passes of at most 5 records, gathered for up to 3 s: the three batches below, offered
  // together, make one pass of the first two with the third behind it, then one of the third.
  const consumer = new StreamConsumer(store, { pollMs: 3_600_000, batchSize: 5, gatherMs: 3000 })
  await consumer.start()
  t.teardown(() => consumer.stop())
  // Lapses in entries of 10: each sweep pass reads at least one whole, so every pass leaves more
  // (the sweep passes of its own made before the batches arrive take a few of them).
  await lapsedRules(raw, 'lapsed', 40, 10)
  const { SignalIngester } = await import('../../src/ingest/batch.js')
  // The three batches are offered together once all are durable (in one tick: a loaded machine's
  // appends are then no part of the gather).
  const appended: Parameters<StreamConsumer['offer']>[0][] = []
  const ingester = new SignalIngester({ stream: store.stream, checks: { asnExists: null, checkExpressions: true }, onAppended: (b) => { appended.push(b) } })
  const body = (n: number) => Buffer.from(JSON.stringify([n, n + 1].map((i) => ({ type: 'access_rules', action: 'block', ip: `192.0.2.${i}` }))))
  consumer.setSweep(1)
  const outcomes = await Promise.all([ingester.ingest('v1', 'w', body(1)), ingester.ingest('v1', 'w', body(3)), ingester.ingest('v1', 'w', body(5))])
  for (const b of appended.splice(0)) consumer.offer(b)
  // The third waits out the gather (3 s) on its own.
  t.equal(await consumer.waitFor(outcomes[2]!.seqs.at(-1)!, 10_000), true)
  const applies = batches.filter((b) => b.ops.length > 0 && b.checkpoint !== undefined)
  t.same(applies.map((b) => b.ops.length), [4, 2], 'two passes: two batches, then the third')
  t.match(applies[0]!.sweep, { limit: 4, scrub: false }, 'behind: a budget of its records, lapses only')
  t.match(applies[1]!.sweep, { limit: 4, scrub: true }, 'none behind: twice its records, the rest scrubbing')
  t.equal((await access(raw, 'w')).length, 6, 'every entry applied')
})

t.test('while records come, the sweep goes in their passes, paced by what they apply; passes of its own wait until the stream is quiet', async (t) => {
  const raw = await withStore(t)
  const { store: watched, batches } = watchedApplies(raw)
  // performance.now() when each apply of records ended, and when each sweep pass of its own began.
  const applied: number[] = []
  const alone: number[] = []
  const store = new Proxy(watched, {
    get (target, prop, receiver) {
      if (prop === 'applyRuleBatch') {
        return async (batch: Parameters<BatchingStore['applyRuleBatch']>[0]) => {
          const result = await target.applyRuleBatch(batch)
          if (batch.ops.length > 0) applied.push(performance.now())
          return result
        }
      }
      if (prop === 'rules') {
        return new Proxy(target.rules, {
          get (rules, p, r) {
            if (p === 'sweepLapsed') return async (...args: Parameters<BatchingStore['rules']['sweepLapsed']>) => { alone.push(performance.now()); return rules.sweepLapsed(...args) }
            return Reflect.get(rules, p, r) as unknown
          },
        })
      }
      return Reflect.get(target, prop, receiver) as unknown
    },
  }) as BatchingStore
  const consumer = new StreamConsumer(store, { pollMs: 3_600_000 })
  await consumer.start()
  t.teardown(() => consumer.stop())
  await lapsedRules(raw, 'lapsed', 40, 10)
  consumer.setSweep(4)
  // Two seconds of batches of 10 records, one every 150 ms (accepted now: a block accepted at T0
  // has lapsed, and the sweep would take it too).
  let last = 0
  for (let i = 0; i < 14; i++) {
    const body = Array.from({ length: 10 }, (_, j) => v1('w', `{"type":"access_rules","action":"block","ip":"192.0.2.${i * 10 + j}"}`, Date.now()))
    last = (await store.stream.append(body)).at(-1)!
    consumer.poll()
    await new Promise((resolve) => setTimeout(resolve, 150))
  }
  t.equal(await consumer.waitFor(last, 10_000), true)
  const busyEnd = applied.at(-1)!
  const carried = batches.filter((b) => b.ops.length > 0 && b.checkpoint !== undefined && b.sweep !== undefined)
  t.ok(carried.length >= 5, `the passes of records carried the sweep (${carried.length})`)
  t.same([...new Set(carried.map((b) => b.sweep!.limit / b.ops.length))], [2], 'each swept twice its records')
  const early = alone.filter((c) => c > applied[0]! && c <= busyEnd).map((c) => c - applied.filter((a) => a <= c).at(-1)!).filter((gap) => gap < 1000)
  t.same(early, [], 'no sweep pass of its own within a second of an apply')
  for (let i = 0; i < 500 && (await access(raw, 'lapsed')).length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal((await access(raw, 'lapsed')).length, 0, 'once the stream is quiet, passes of its own sweep the rest')
  t.ok(alone.some((c) => c >= busyEnd + 1000), 'beginning a second after the last apply')
  t.equal((await access(raw, 'w')).length, 140, 'every record applied')
})

t.test('an apply whose sweep fails is retried without it: applying never waits on the sweep', async (t) => {
  const raw = await withStore(t)
  const { store, batches } = watchedApplies(raw, 1)
  await lapsedRules(raw, 'w', 1, 5)
  const warnings: string[] = []
  const consumer = new StreamConsumer(store, { pollMs: 30, log: { warn: (_o: unknown, msg: string) => { warnings.push(msg) }, error: () => {} } as never })
  await consumer.start()
  t.teardown(() => consumer.stop())
  const [seq] = await store.stream.append([v1('w', '{"type":"access_rules","action":"block","ip":"198.51.100.7"}')])
  consumer.poll()
  consumer.setSweep(100)
  t.equal(await consumer.waitFor(seq!, 30_000), true, 'applied')
  const applies = batches.filter((b) => b.checkpoint !== undefined)
  t.ok(applies.some((b) => b.sweep !== undefined), 'the failed pass carried a sweep')
  t.equal(applies.at(-1)!.sweep, undefined, 'the retry carried none')
  t.equal((await access(store, 'w')).length, 6, 'the lapsed rules wait for the sweep to be tried again')
})
