/**
 * packBatch/unpackBatch, the form batches take to the consumer thread: the round trip gives
 * back the same seqs and commands, field for field, for every kind of command.
 */
import t from 'tap'
import fc from 'fast-check'
import type { AppendedBatch } from '../../src/ingest/batch.js'
import type { Command } from '../../src/ingest/commands.js'
import { packBatch, unpackBatch } from '../../src/stream/batch-columns.js'

const access = (over: Partial<Extract<Command, { kind: 'access_rule', op: 'upsert' }>> = {}): Command => ({
  kind: 'access_rule', op: 'upsert', ruleRef: null, target: { type: 'ip', value: '192.0.2.1/32' }, action: 'block', name: null, reason: null, labels: {}, confidence: null, severity: null, expiresIn: null, ...over,
})

const cases: Array<{ description: string, batch: AppendedBatch }> = [
  { description: 'empty', batch: { workspaceId: 'w', acceptedAt: 1, seqs: [], commands: [] } },
  { description: 'one access upsert, nulls', batch: { workspaceId: 'w', acceptedAt: 1, seqs: [7], commands: [access()] } },
  {
    description: 'every field set, labels of each value type',
    batch: { workspaceId: 'w', acceptedAt: 2, seqs: [1, 2], commands: [access({ ruleRef: 'r', target: { type: 'asn', value: 'AS1' }, action: 'allow', name: 'n', reason: 'why', labels: { a: 'x', n: 1.5, b: false }, confidence: 'high', severity: 'critical', expiresIn: 0 }), access({ target: { type: 'country', value: 'DE' }, expiresIn: 86400 })] },
  },
  {
    description: 'other commands keep their place between upserts',
    batch: {
      workspaceId: 'w',
      acceptedAt: 3,
      seqs: [10, 11, 12, 13, 14, 15],
      commands: [
        { kind: 'access_rule', op: 'delete', ruleRef: null, target: { type: 'ip', value: '10.0.0.0/8' } },
        access({ labels: { k: 'v' } }),
        { kind: 'waf_rule', op: 'upsert', ruleRef: 'w1', name: 'w', type: 'custom', expression: 'http.host eq "x"', action: 'block', phase: 'request', order: 3, shortDescription: null, config: { phase: 'request', nested: { a: [1, 'b'] } }, reason: null, labels: { t: 'x' }, expiresIn: 5 },
        access(),
        { kind: 'smart_firewall_rule', op: 'delete', ruleRef: 's1' },
        { kind: 'access_rule', op: 'delete', ruleRef: 'r', target: null },
      ],
    },
  },
  { description: 'seqs that do not run on by one', batch: { workspaceId: 'w', acceptedAt: 4, seqs: [3, 5, 9], commands: [access(), access(), access()] } },
  { description: 'text that JSON must escape', batch: { workspaceId: 'w"\\', acceptedAt: 5, seqs: [1], commands: [access({ name: 'a\u2028b\ud800"\n', reason: '\u0000' })] } },
]

t.test('round trip: a table of batches', async (t) => {
  for (const c of cases) t.strictSame(unpackBatch(packBatch(c.batch)), c.batch, c.description)
})

t.test('round trip: random access upserts', async (t) => {
  const nullable = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null })
  const upsert = fc.record({
    ruleRef: nullable(fc.string()),
    target: fc.record({ type: fc.constantFrom('ip' as const, 'asn' as const, 'country' as const), value: fc.string() }),
    action: fc.constantFrom('block' as const, 'allow' as const),
    name: nullable(fc.string()),
    reason: nullable(fc.string()),
    labels: fc.dictionary(fc.string().filter((k) => k !== '__proto__'), fc.oneof(fc.string(), fc.integer(), fc.boolean())),
    confidence: nullable(fc.constantFrom('low' as const, 'medium' as const, 'high' as const)),
    severity: nullable(fc.constantFrom('low' as const, 'medium' as const, 'high' as const, 'critical' as const)),
    expiresIn: nullable(fc.nat()),
  }).map((r) => access({ ...r, target: { type: r.target.type, value: r.target.value }, labels: { ...r.labels } })) // fast-check may build null-prototype objects; commands are plain ones
  fc.assert(fc.property(fc.array(upsert, { maxLength: 50 }), fc.nat(), (commands, first) => {
    const batch: AppendedBatch = { workspaceId: 'w', acceptedAt: 9, seqs: commands.map((_, i) => first + i), commands }
    t.strictSame(unpackBatch(packBatch(batch)), batch)
  }), { numRuns: 300 })
})
