/**
 * packBatch/unpackBatch, the form batches take to the embedded store's consumer thread (the
 * stream's packBatch with the store's packer, the store's unpackBatch): applying the unpacked
 * operations stores exactly the rules that applying the commands does (ids and times aside), for
 * every kind of command, for new rules and for rules that exist already; and a buffer that is
 * not a packed batch is refused, never half-applied.
 */
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AppendedBatch } from '../../src/ingest/batch.js'
import type { Command } from '../../src/ingest/commands.js'
import type { BatchingStore } from '../../src/store/batch-types.js'
import { openEmbeddedStore, type EmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { EmbeddedBatchPacker, unpackBatch as unpackWith, type EmbeddedRuleOp } from '../../src/store/embedded/packed-batch.js'
import type { AccessRule, Rule, RuleKind } from '../../src/store/types.js'
import { toRuleOp } from '../../src/stream/apply.js'
import { commandFromText, packBatch as packWith } from '../../src/stream/packed-batch.js'

const packer = new EmbeddedBatchPacker()
const packBatch = (batch: AppendedBatch): ArrayBuffer | null => packWith(packer, batch)
const unpackBatch = (packed: ArrayBuffer) => unpackWith(packed, commandFromText)

async function withStore (t: Test): Promise<EmbeddedStore> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-packed-'))
  const store = await openEmbeddedStore(dir)
  t.teardown(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) })
  return store
}

const WS = '7c6d0a52-93c4-4b0e-9a55-3f2d3b1c9e01'
const T0 = 1_700_000_000_000

const access = (over: Partial<Extract<Command, { kind: 'access_rule', op: 'upsert' }>> = {}): Command => ({
  kind: 'access_rule', op: 'upsert', ruleRef: null, target: { type: 'ip', value: '192.0.2.1/32' }, action: 'block', name: null, reason: null, labels: {}, confidence: null, severity: null, expiresIn: null, ...over,
})

const batchOf = (commands: Command[], first = 1, acceptedAt = T0): AppendedBatch =>
  ({ workspaceId: WS, acceptedAt, seqs: commands.map((_, i) => first + i), commands })

const opsOf = (packed: ArrayBuffer): EmbeddedRuleOp[] => {
  const ops: EmbeddedRuleOp[] = []
  unpackBatch(packed).pushOps(ops)
  return ops
}

const KINDS: RuleKind[] = ['access_rule', 'waf_rule', 'smart_firewall_rule']

/** Every rule of the workspace without what differs between two stores (ids, times). */
async function rulesOf (store: BatchingStore): Promise<unknown[]> {
  const out: unknown[] = []
  for (const kind of KINDS) {
    for (const r of await store.rules.list(WS, kind) as Rule[]) {
      const { id: _i, createdAt: _c, updatedAt: _u, ...rest } = r
      out.push(rest)
    }
  }
  return out
}

/** Applies each batch both ways, in order, to two stores; the stored rules must be the same. */
async function sameBothWays (t: Test, batches: AppendedBatch[], message: string): Promise<void> {
  const packed = await withStore(t)
  const direct = await withStore(t)
  for (const b of batches) {
    const buffer = packBatch(b)
    t.not(buffer, null)
    await packed.applyRuleBatch({ ops: opsOf(buffer!) })
    await direct.applyRuleBatch({ ops: b.commands.map((c, i) => toRuleOp(c, b.workspaceId, b.seqs[i]!, b.acceptedAt)) })
  }
  t.same(await rulesOf(packed), await rulesOf(direct), message)
}

const cases: Array<{ description: string, batches: Command[][] }> = [
  { description: 'one access upsert, nulls', batches: [[access()]] },
  {
    description: 'every field set, labels of each value type, each target type',
    batches: [[
      access({ target: { type: 'asn', value: 'AS1' }, action: 'allow', name: 'n', reason: 'why', labels: { a: 'x', n: 1.5, b: false }, confidence: 'high', severity: 'critical', expiresIn: 0 }),
      access({ target: { type: 'country', value: 'DE' }, expiresIn: 86400 }),
      access({ target: { type: 'ip', value: '2001:db8::/32' }, reason: 'é ✓ \u2028 "quoted"' }),
    ]],
  },
  {
    description: 'keyed upserts and the other commands keep their place between encoded upserts',
    batches: [[
      access({ target: { type: 'ip', value: '10.0.0.0/8' } }),
      access({ ruleRef: 'r1', target: { type: 'ip', value: '10.0.0.0/8' }, action: 'allow' }),
      { kind: 'access_rule', op: 'delete', ruleRef: null, target: { type: 'ip', value: '10.0.0.0/8' } },
      access({ labels: { k: 'v' } }),
      { kind: 'waf_rule', op: 'upsert', ruleRef: 'w1', name: 'w', type: 'custom', expression: 'http.host eq "x"', action: 'block', phase: 'request', order: 3, shortDescription: null, config: { phase: 'request', nested: { a: [1, 'b'] } }, reason: null, labels: { t: 'x' }, expiresIn: 5 },
      { kind: 'smart_firewall_rule', op: 'delete', ruleRef: 's1' },
      { kind: 'access_rule', op: 'delete', ruleRef: 'r9', target: null },
    ]],
  },
  {
    description: 'an upsert of a rule that exists: updated in place, across batches and within one',
    batches: [
      [access({ reason: 'first', expiresIn: 60 }), access({ target: { type: 'asn', value: 'AS7' } })],
      [access({ reason: 'second', name: 'again', expiresIn: 7200 }), access({ reason: 'third' }), access({ target: { type: 'asn', value: 'AS7' }, action: 'allow' })],
    ],
  },
]

t.test('the same rules as applying the commands: a table of batches', async (t) => {
  for (const c of cases) await sameBothWays(t, c.batches.map((commands, i) => batchOf(commands, 1 + i * 100, T0 + i)), c.description)
})

t.test('the same rules as applying the commands: random access upserts over a few targets', async (t) => {
  const nullable = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null })
  const upsert = fc.record({
    target: fc.record({ type: fc.constant('ip' as const), value: fc.constantFrom('192.0.2.1/32', '192.0.2.2/32', '198.51.100.0/24') }),
    action: fc.constantFrom('block' as const, 'allow' as const),
    name: nullable(fc.string()),
    reason: nullable(fc.string()),
    labels: fc.dictionary(fc.string().filter((k) => k !== '__proto__'), fc.oneof(fc.string(), fc.integer(), fc.boolean())),
    confidence: nullable(fc.constantFrom('low' as const, 'medium' as const, 'high' as const)),
    severity: nullable(fc.constantFrom('low' as const, 'medium' as const, 'high' as const, 'critical' as const)),
    expiresIn: nullable(fc.nat({ max: 10 ** 6 })),
  }).map((r) => access({ ...r, target: { ...r.target }, labels: { ...r.labels } })) // fast-check may build null-prototype objects
  await fc.assert(fc.asyncProperty(fc.array(fc.array(upsert, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 3 }), async (batches) => {
    await t.test('run', async (t) => {
      await sameBothWays(t, batches.map((commands, i) => batchOf(commands, 1 + i * 10, T0 + i)), 'same rules')
    })
  }), { numRuns: 25 })
})

t.test('an existing rule keeps its id and creation time; its update time is the time it is applied', async (t) => {
  const store = await withStore(t)
  await store.applyRuleBatch({ ops: opsOf(packBatch(batchOf([access({ reason: 'first' })]))!) })
  const [before] = await store.rules.list(WS, 'access_rule') as AccessRule[]
  await new Promise((resolve) => setTimeout(resolve, 5))
  await store.applyRuleBatch({ ops: opsOf(packBatch(batchOf([access({ reason: 'second' })], 2))!) })
  const [after] = await store.rules.list(WS, 'access_rule') as AccessRule[]
  t.equal(after!.id, before!.id)
  t.equal(after!.createdAt, before!.createdAt)
  t.ok(after!.updatedAt > before!.updatedAt)
  t.equal(after!.reason, 'second')
  t.equal(after!.seq, 2)
  t.ok(before!.createdAt > T0, 'times are those of the application, not of acceptance')
})

t.test('batches that are not packed, and buffers that are not packed batches', async (t) => {
  t.equal(packBatch(batchOf([])), null, 'empty')
  t.equal(packBatch({ ...batchOf([access(), access()]), seqs: [3, 5] }), null, 'seqs that do not run on by one')
  const good = packBatch(batchOf([access(), access({ ruleRef: 'r' })]))!
  const bytes = new Uint8Array(good)
  const bad: Array<[string, Uint8Array]> = [
    ['another format', Uint8Array.of(9, ...bytes.subarray(1))],
    ['cut in the header', bytes.slice(0, 10)],
    ['cut in an encoded rule', bytes.slice(0, 80)],
    ['cut in a command', bytes.slice(0, bytes.length - 3)],
    ['an unknown tag', (() => { const b = bytes.slice(); b[1 + 4 + WS.length + 8 + 8 + 4] = 7; return b })()],
    ['trailing bytes', Uint8Array.of(...bytes, 0)],
  ]
  for (const [description, b] of bad) {
    t.throws(() => { unpackBatch(b.slice().buffer).pushOps([]) }, RangeError, description)
  }
})
