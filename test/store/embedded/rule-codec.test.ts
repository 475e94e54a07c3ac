/**
 * The binary form of access rules: every rule comes back exactly as written (fast-check over
 * every field's range, Unicode and long strings included), and values of another form are refused.
 */
import fc from 'fast-check'
import t from 'tap'
import { ByteWriter } from '../../../src/store/embedded/byte-writer.js'
import { accessRuleTargetHash, accessRuleTargetIdentity, decodeAccessRule, encodeAccessRule, targetIdentityHash } from '../../../src/store/embedded/rule-codec.js'
import { CONFIDENCES, SEVERITIES, type AccessRule } from '../../../src/store/types.js'

const text = fc.oneof(fc.string({ maxLength: 80 }), fc.string({ unit: 'binary', maxLength: 300 }), fc.string({ minLength: 60, maxLength: 70 }))
const time = fc.oneof(fc.integer({ min: 0, max: 2 ** 53 - 1 }), fc.constantFrom(0, 1_700_000_000_000))

const ruleArb: fc.Arbitrary<AccessRule> = fc.record({
  // Canonical UUIDs are stored as 16 bytes, anything else as text: both must come back as given.
  id: fc.oneof(fc.uuid(), fc.uuid().map((u) => u.toUpperCase()), fc.string({ maxLength: 40 })),
  workspaceId: fc.uuid(),
  kind: fc.constant('access_rule' as const),
  ruleRef: fc.option(text, { nil: null }),
  target: fc.record({ type: fc.constantFrom('ip' as const, 'asn' as const, 'country' as const), value: text }),
  action: fc.constantFrom('block' as const, 'allow' as const),
  name: fc.option(text, { nil: null }),
  confidence: fc.option(fc.constantFrom(...CONFIDENCES), { nil: null }),
  severity: fc.option(fc.constantFrom(...SEVERITIES), { nil: null }),
  labels: fc.dictionary(fc.string({ maxLength: 10 }).filter((k) => k !== '__proto__'), fc.oneof(fc.string(), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean()), { maxKeys: 5 }),
  reason: fc.option(text, { nil: null }),
  expiresAt: fc.option(time, { nil: null }),
  createdAt: time,
  updatedAt: time,
  seq: fc.nat(),
})

t.test('a rule comes back exactly as written', async (t) => {
  const w = new ByteWriter(16) // small, so that growing is exercised too
  fc.assert(fc.property(ruleArb, (rule) => {
    w.reset()
    encodeAccessRule(w, rule, rule.id, rule.createdAt, rule.updatedAt)
    const back = decodeAccessRule(Buffer.from(w.view()), rule.workspaceId)
    t.strictSame(back, JSON.parse(JSON.stringify(rule)) as AccessRule)
    return true
  }), { numRuns: 300 })
})

t.test('a target hashed in its record, and in a larger buffer, equals the hash of its identity', async (t) => {
  const w = new ByteWriter(16)
  const hashes = new Map<number, string>()
  fc.assert(fc.property(ruleArb, (rule) => {
    w.reset()
    encodeAccessRule(w, rule, rule.id, rule.createdAt, rule.updatedAt)
    const record = Buffer.from(w.view())
    const identity = `${rule.target.type}\u001f${rule.target.value}`
    t.equal(accessRuleTargetIdentity(record), identity)
    // lmdb-js hands the arrival scan its shared read buffer: the record, then whatever was there.
    const shared = Buffer.concat([record, Buffer.alloc(64, 0xab)])
    t.equal(accessRuleTargetHash(shared), targetIdentityHash(identity), 'in the record')
    t.equal(accessRuleTargetHash(record), targetIdentityHash(identity), 'in a buffer of its own')
    hashes.set(targetIdentityHash(identity), identity)
    return true
  }), { numRuns: 300 })
  // Different targets spread (not a promise the index rests on: each hit is checked).
  const types = ['ip', 'asn', 'country'] as const
  const seen = new Set<number>()
  for (const type of types) for (let i = 0; i < 20_000; i++) seen.add(targetIdentityHash(`${type}\u001f10.${i >> 8}.${i & 255}.0/24`))
  t.equal(seen.size, 60_000, 'no two of 60,000 targets of one hash')
  t.throws(() => targetIdentityHash('url\u001fx'), TypeError, 'a type it cannot store')
})

t.test('a rule without an id gets a new random version-4 UUID', async (t) => {
  const w = new ByteWriter()
  const input = { workspaceId: 'w', kind: 'access_rule' as const, ruleRef: null, target: { type: 'ip' as const, value: '192.0.2.1/32' }, action: 'block' as const, name: null, confidence: null, severity: null, labels: {}, reason: null, expiresAt: null, seq: 1 }
  const ids = new Set<string>()
  for (let i = 0; i < 600; i++) { // past one refill of the random pool
    w.reset()
    encodeAccessRule(w, input, null, 1, 1)
    ids.add(decodeAccessRule(Buffer.from(w.view()), 'w').id)
  }
  t.equal(ids.size, 600, 'all different')
  t.ok([...ids].every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id)), 'all version-4 UUIDs')
})

t.test('values that are not this form are refused', async (t) => {
  const w = new ByteWriter()
  const rule: AccessRule = {
    id: 'i', workspaceId: 'w', kind: 'access_rule', ruleRef: 'r', target: { type: 'ip', value: '192.0.2.1/32' }, action: 'block', name: 'n',
    confidence: 'high', severity: 'low', labels: { a: 1 }, reason: 'why', expiresAt: 5, createdAt: 1, updatedAt: 2, seq: 3,
  }
  encodeAccessRule(w, rule, rule.id, rule.createdAt, rule.updatedAt)
  const good = Buffer.from(w.view())
  const cases = [
    { description: 'the JSON of format 1', value: Buffer.from(JSON.stringify(rule)) },
    { description: 'a truncated value', value: good.subarray(0, good.length - 2) },
    { description: 'an empty value', value: Buffer.alloc(0) },
    { description: 'an unknown action code', value: Buffer.from(good).fill(9, 2, 3) },
  ]
  for (const c of cases) t.throws(() => decodeAccessRule(c.value, 'w'), RangeError, c.description)
  t.throws(() => encodeAccessRule(w, { ...rule, action: 'drop' as 'block' }, 'i', 1, 1), TypeError, 'an action it cannot store')
})
