import t from 'tap'
import { normalizeV1 } from '../../src/ingest/normalize-v1.js'
import type { EntryChecks } from '../../src/ingest/entry-rules.js'

const checks: EntryChecks = { asnExists: (asn) => asn === 1221 || asn === 13335, checkExpressions: true }
const base = { type: 'access_rules', action: 'block' }
const upsert = (target: { type: string, value: string }, expiresIn: number | null = 86400, extra: Record<string, unknown> = {}) => ({
  ok: true,
  command: { kind: 'access_rule', op: 'upsert', ruleRef: null, target, action: 'block', name: null, reason: null, labels: {}, confidence: null, severity: null, expiresIn, ...extra },
})
const fail = (path: string, message: string, value: unknown) => ({ ok: false, failure: { path, message, value } })

const cases: Array<{ description: string, input: unknown, expected: unknown }> = [
  // --- targets and their normalization (DECISIONS §3) ---
  { description: 'IPv4 host → /32', input: { ...base, ip: '192.0.2.1' }, expected: upsert({ type: 'ip', value: '192.0.2.1/32' }) },
  { description: 'host bits set → network', input: { ...base, ip: '10.0.0.1/8' }, expected: upsert({ type: 'ip', value: '10.0.0.0/8' }) },
  { description: 'IPv6 → RFC 5952 /128', input: { ...base, ip: '2001:DB8:0:0::1' }, expected: upsert({ type: 'ip', value: '2001:db8::1/128' }) },
  { description: 'IPv4-mapped IPv6 → IPv4', input: { ...base, ip: '::ffff:1.2.3.4' }, expected: upsert({ type: 'ip', value: '1.2.3.4/32' }) },
  { description: 'zone id', input: { ...base, ip: 'fe80::1%eth0' }, expected: fail('ip', 'zone ids are not allowed', 'fe80::1%eth0') },
  { description: 'leading zeros', input: { ...base, ip: '010.1.1.1' }, expected: fail('ip', 'IPv4 octets with leading zeros are not allowed', '010.1.1.1') },
  { description: 'hex form', input: { ...base, ip: '0x0a000001' }, expected: fail('ip', 'IPv4 addresses in hex form are not allowed', '0x0a000001') },
  { description: 'integer form', input: { ...base, ip: '167772161' }, expected: fail('ip', 'IPv4 addresses in integer form are not allowed', '167772161') },
  { description: 'prefix out of range', input: { ...base, ip: '10.0.0.0/33' }, expected: fail('ip', 'prefix length 33 is out of range for IPv4', '10.0.0.0/33') },
  { description: 'whitespace', input: { ...base, ip: ' 10.0.0.1' }, expected: fail('ip', 'whitespace and control characters are not allowed', ' 10.0.0.1') },
  { description: 'IPv4 wider than /8', input: { ...base, ip: '0.0.0.0/0' }, expected: fail('ip', 'IPv4 prefixes shorter than /8 are refused', '0.0.0.0/0') },
  { description: 'IPv6 wider than /12', input: { ...base, ip: '::/11' }, expected: fail('ip', 'IPv6 prefixes shorter than /12 are refused', '::/11') },
  { description: 'ASN any case, leading zeros dropped', input: { ...base, asn: 'as01221' }, expected: upsert({ type: 'asn', value: 'AS1221' }) },
  { description: 'ASN not in the database', input: { ...base, asn: 'AS64512' }, expected: fail('asn', 'AS64512 is not in the ASN database', 'AS64512') },
  { description: 'ASN 0', input: { ...base, asn: 'AS0' }, expected: fail('asn', 'must be AS<digits> with a number from 1 to 4294967295', 'AS0') },
  { description: 'ASN too large', input: { ...base, asn: 'AS4294967296' }, expected: fail('asn', 'must be AS<digits> with a number from 1 to 4294967295', 'AS4294967296') },
  { description: 'ASN without prefix', input: { ...base, asn: '13335' }, expected: fail('asn', 'must be AS<digits> with a number from 1 to 4294967295', '13335') },
  { description: 'country any case → uppercase', input: { ...base, country: 'de' }, expected: upsert({ type: 'country', value: 'DE' }) },
  { description: 'country XX', input: { ...base, country: 'XX' }, expected: fail('country', 'must be an ISO-3166 alpha-2 code', 'XX') },
  { description: 'country UK', input: { ...base, country: 'UK' }, expected: fail('country', 'must be an ISO-3166 alpha-2 code', 'UK') },
  { description: 'country EU', input: { ...base, country: 'EU' }, expected: fail('country', 'must be an ISO-3166 alpha-2 code', 'EU') },
  { description: 'country alpha-3', input: { ...base, country: 'DEU' }, expected: fail('country', 'must be an ISO-3166 alpha-2 code', 'DEU') },
  // --- exactly one of ip, asn, country ---
  { description: 'none', input: { ...base }, expected: fail('', 'exactly one of ip, asn, country is required (none was given)', {}) },
  { description: 'all empty', input: { ...base, ip: '', asn: '', country: '' }, expected: fail('', 'exactly one of ip, asn, country is required (none was given)', { ip: '', asn: '', country: '' }) },
  { description: 'two', input: { ...base, ip: '10.0.0.1', country: 'DE' }, expected: fail('', 'exactly one of ip, asn, country is allowed (got ip, country)', { ip: '10.0.0.1', country: 'DE' }) },
  { description: 'an empty one counts as absent', input: { ...base, ip: '', country: 'DE' }, expected: upsert({ type: 'country', value: 'DE' }) },
  // --- expiry policy ---
  { description: 'expiration 0 → one day', input: { ...base, ip: '10.0.0.1', expiration: 0 }, expected: upsert({ type: 'ip', value: '10.0.0.1/32' }, 86400) },
  { description: 'expiration 1 → 60', input: { ...base, ip: '10.0.0.1', expiration: 1 }, expected: upsert({ type: 'ip', value: '10.0.0.1/32' }, 60) },
  { description: 'expiration 59 → 60', input: { ...base, ip: '10.0.0.1', expiration: 59 }, expected: upsert({ type: 'ip', value: '10.0.0.1/32' }, 60) },
  { description: 'expiration 61 kept', input: { ...base, ip: '10.0.0.1', expiration: 61 }, expected: upsert({ type: 'ip', value: '10.0.0.1/32' }, 61) },
  { description: 'negative expiration', input: { ...base, ip: '10.0.0.1', expiration: -1 }, expected: fail('expiration', 'must not be negative', -1) },
  { description: 'name and description', input: { ...base, ip: '10.0.0.1', name: 'n', description: 'why' }, expected: upsert({ type: 'ip', value: '10.0.0.1/32' }, 86400, { name: 'n', reason: 'why' }) },
  // --- unblock ---
  { description: 'unblock by target', input: { type: 'access_rules', action: 'unblock', ip: '10.0.0.1/8' }, expected: { ok: true, command: { kind: 'access_rule', op: 'delete', ruleRef: null, target: { type: 'ip', value: '10.0.0.0/8' } } } },
  { description: 'unblock ignores expiration', input: { type: 'access_rules', action: 'unblock', country: 'fr', expiration: -5 }, expected: { ok: true, command: { kind: 'access_rule', op: 'delete', ruleRef: null, target: { type: 'country', value: 'FR' } } } },
  // --- shape ---
  { description: 'not an object', input: [1], expected: fail('', 'must be an object', [1]) },
  { description: 'null entry', input: null, expected: fail('', 'must be an object', null) },
  { description: 'wrong type value', input: { type: 'waf', action: 'block', ip: '10.0.0.1' }, expected: fail('type', 'must be "access_rules"', 'waf') },
  { description: '__proto__ key', input: JSON.parse('{"type":"access_rules","action":"block","ip":"10.0.0.1","__proto__":{"x":1}}'), expected: fail('__proto__', 'key is not allowed (reserved name or starting with $)', '__proto__') },
  { description: 'constructor key', input: { ...base, ip: '10.0.0.1', constructor: 1 }, expected: fail('constructor', 'key is not allowed (reserved name or starting with $)', 'constructor') },
  { description: '$ key', input: { ...base, $where: '1', ip: '10.0.0.1' }, expected: fail('$where', 'key is not allowed (reserved name or starting with $)', '$where') },
  { description: 'ip as an object', input: { ...base, ip: { $gt: '' } }, expected: fail('ip.$gt', 'key is not allowed (reserved name or starting with $)', '$gt') },
]

t.test('v1 entries', async (t) => {
  for (const c of cases) t.same(normalizeV1(c.input, checks), c.expected, c.description)
})

t.test('without the ASN check (the consumer), any well-formed ASN passes', async (t) => {
  t.same(normalizeV1({ ...base, asn: 'AS64512' }, { asnExists: null, checkExpressions: false }), upsert({ type: 'asn', value: 'AS64512' }))
})
