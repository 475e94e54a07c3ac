/**
 * POST /v1/signal end to end: outcomes and exact bodies (SPEC 2.5, 2.6, 4.1; DECISIONS §3), the
 * rule lifecycle of SPEC §3, and read-your-writes.
 */
import t from 'tap'
import { block, eventually, post, startTestServer, unblock, withoutReceipt } from '../helpers/server.js'
import type { AccessRule } from '../../src/store/types.js'

const srv = await startTestServer({ frontThreads: true })
t.teardown(() => srv.close())
const ws = srv.workspace.id
const accessRules = async (workspaceId = ws) => (await srv.store.rules.list(workspaceId, 'access_rule', Date.now())) as AccessRule[]
const settle = async () => { await srv.consumer.waitFor(await srv.store.stream.head(), 1000) }

t.test('outcomes and exact bodies', async (t) => {
  const cases: Array<{ description: string, body: string | unknown[], status: number, expected: unknown }> = [
    { description: 'all processed', body: [block({ ip: '203.0.113.1' }), block({ country: 'de' })], status: 200, expected: { success: true, message: 'Processed 2 entries, 0 failed' } },
    {
      description: 'some fail',
      body: [block({ ip: '203.0.113.2' }), block({ asn: 'AS64512' }), block({ ip: '203.0.113.3', country: 'FR' }), block({ ip: '10.0.0.0/4' })],
      status: 206,
      expected: {
        success: false,
        message: 'Processed 4 entries, 3 failed',
        errors: [
          'Entry 1: asn: AS64512 is not in the ASN database',
          'Entry 2: exactly one of ip, asn, country is allowed (got ip, country)',
          'Entry 3: ip: IPv4 prefixes shorter than /8 are refused',
        ],
      },
    },
    {
      description: 'every entry fails',
      body: [block({ country: 'XX' }), { type: 'access_rules', action: 'ban', ip: '1.2.3.4' }, block({ ip: '1.2.3.4', expiration: '60' })],
      status: 400,
      expected: {
        error: 'ValidationError',
        message: 'Validation failed',
        code: 400,
        details: [
          { field: '[0].country', message: 'must be an ISO-3166 alpha-2 code', value: 'XX' },
          { field: '[1].action', message: 'must be one of block, unblock', value: 'ban' },
          { field: '[2].expiration', message: 'must be an integer', value: '60' },
        ],
      },
    },
    { description: 'malformed JSON', body: '[{"type":"access_rules",', status: 400, expected: { error: 'BadRequestError', message: 'request body is not valid JSON', code: 400 } },
    { description: 'not an array', body: '{"type":"access_rules","action":"block","ip":"1.2.3.4"}', status: 400, expected: { error: 'BadRequestError', message: 'request body must be a JSON array of signal entries', code: 400 } },
    { description: '0 entries', body: [], status: 400, expected: { error: 'BadRequestError', message: 'batch must contain 1 to 1000 entries (got 0)', code: 400 } },
    { description: '1001 entries', body: Array(1001).fill(block({ ip: '1.2.3.4' })), status: 400, expected: { error: 'BadRequestError', message: 'batch must contain 1 to 1000 entries (got 1001)', code: 400 } },
    { description: 'deep nesting', body: '['.repeat(50_000) + ']'.repeat(50_000), status: 400, expected: { error: 'ValidationError', message: 'Validation failed', code: 400, details: [{ field: '[0]', message: 'must be an object', value: null }] } },
    { description: '__proto__ key', body: '[{"type":"access_rules","action":"block","ip":"1.2.3.4","__proto__":{"admin":true}}]', status: 400, expected: { error: 'ValidationError', message: 'Validation failed', code: 400, details: [{ field: '[0].__proto__', message: 'key is not allowed (reserved name or starting with $)', value: '__proto__' }] } },
    { description: '$ operator', body: [block({ ip: { $ne: null } })], status: 400, expected: { error: 'ValidationError', message: 'Validation failed', code: 400, details: [{ field: '[0].ip.$ne', message: 'key is not allowed (reserved name or starting with $)', value: '$ne' }] } },
  ]
  for (const c of cases) {
    const r = await post(srv, 'v1', c.body)
    t.equal(r.status, c.status, c.description)
    t.same(withoutReceipt(r.body), c.expected, c.description)
    t.match(r.headers.get('content-type'), /^application\/json/)
  }
  t.same(withoutReceipt((await post(srv, 'v1', [block({ ip: '1.2.3.4' })])).body), { success: true, message: 'Processed 1 entries, 0 failed' }, 'a 1-entry batch')
  t.equal((await post(srv, 'v1', Array(1000).fill(block({ ip: '1.2.3.4' })))).status, 200, '1000 entries is the limit')
})

t.test('an acknowledged entry is in the rule store within 1 s (read-your-writes)', async (t) => {
  for (let i = 0; i < 5; i++) {
    const ip = `198.51.100.${10 + i}`
    const r = await post(srv, 'v1', [block({ ip, name: `n${i}`, description: 'scanner' })])
    t.equal(r.status, 200)
    const after = await eventually(async () => (await accessRules()).some((x) => x.target.value === `${ip}/32`), 1000)
    t.ok(after >= 0 && after <= 1000, `visible after ${after} ms`)
  }
  const rule = (await accessRules()).find((x) => x.target.value === '198.51.100.10/32')!
  t.match(rule, { ruleRef: null, action: 'block', name: 'n0', reason: 'scanner', labels: {}, confidence: null, severity: null })
})

t.test('identity by target: upsert in place, expiry reset, no duplicates', async (t) => {
  await post(srv, 'v1', [block({ ip: '192.0.2.0/24', expiration: 600 })])
  await settle()
  const first = (await accessRules()).filter((x) => x.target.value === '192.0.2.0/24')
  t.equal(first.length, 1)
  await new Promise((resolve) => setTimeout(resolve, 20))
  await post(srv, 'v1', [block({ ip: '192.0.2.77/24', expiration: 6000 }), block({ ip: '192.0.2.0/24', expiration: 30 })])
  await settle()
  const second = (await accessRules()).filter((x) => x.target.value === '192.0.2.0/24')
  t.equal(second.length, 1, 'one rule for the target, however written')
  t.equal(second[0]!.id, first[0]!.id, 'updated in place')
  t.equal(second[0]!.createdAt, first[0]!.createdAt)
  t.ok(second[0]!.expiresAt! - second[0]!.updatedAt <= 60_000 + 1000, 'the last write in the batch wins: 30 s floored at 60 s')
  t.ok(second[0]!.expiresAt! > first[0]!.expiresAt! - 600_000, 'expiry recomputed')
})

t.test('unblock removes every rule of the target (keyed or not); deleting nothing succeeds', async (t) => {
  const v2 = await post(srv, 'v2', [
    { kind: 'access_rule', op: 'upsert', rule_ref: 'k-a', rule: { target: { ip: '100.64.0.1' } } },
    { kind: 'access_rule', op: 'upsert', rule_ref: 'k-b', rule: { target: { ip: '100.64.0.1/32' } } },
  ])
  t.equal(v2.status, 200)
  await post(srv, 'v1', [block({ ip: '100.64.0.1' })])
  await settle()
  t.equal((await accessRules()).filter((x) => x.target.value === '100.64.0.1/32').length, 3)
  const r = await post(srv, 'v1', [unblock({ ip: '::ffff:100.64.0.1' })])
  t.same(withoutReceipt(r.body), { success: true, message: 'Processed 1 entries, 0 failed' })
  await settle()
  t.equal((await accessRules()).filter((x) => x.target.value === '100.64.0.1/32').length, 0)
  const again = await post(srv, 'v1', [unblock({ ip: '100.64.0.1' }), unblock({ asn: 'AS1221' })])
  t.equal(again.status, 200, 'idempotent')
})

t.test('default expiry of a block is one day', async (t) => {
  const before = Date.now()
  await post(srv, 'v1', [block({ asn: 'as209' })])
  await settle()
  const r = (await accessRules()).find((x) => x.target.value === 'AS209')!
  t.ok(r.expiresAt! >= before + 86_400_000 && r.expiresAt! <= Date.now() + 86_400_000)
})

t.test('a key writes only into its own workspace', async (t) => {
  await post(srv, 'v1', [block({ ip: '233.252.0.9' })], 'other')
  await settle()
  t.equal((await accessRules(srv.otherWorkspace.id)).filter((x) => x.target.value === '233.252.0.9/32').length, 1)
  t.equal((await accessRules()).filter((x) => x.target.value === '233.252.0.9/32').length, 0)
})

t.test('the stream record of a v1 entry is byte-for-byte the entry text, in whole and partial batches', async (t) => {
  const entry = '{ "type":"access_rules" ,"action" : "block", "ip":"192.0.2.200", "description":"caf\\u00e9 é", "expiration": 1.2e2 }'
  const other = '{"type":"access_rules","action":"unblock","ip":"192.0.2.201","description":"] , [ \\" {"}'
  const bad = '{"type":"access_rules","action":"block","ip":"192.0.2.300"}'
  const cases: Array<[string, string, number, string[]]> = [
    ['one entry', `[\n${entry}\n]`, 200, [entry]],
    ['every entry accepted, odd spacing', ` [${entry} ,\n\t${other}]\r\n`, 200, [entry, other]],
    ['a failed entry between two accepted ones', `[${entry},${bad}, ${other}]`, 206, [entry, other]],
  ]
  for (const [name, body, status, payloads] of cases) {
    const headBefore = await srv.store.stream.head()
    const r = await post(srv, 'v1', body)
    t.equal(r.status, status, `${name}: ${JSON.stringify(r.body)}`)
    const records = await srv.store.stream.read(headBefore + 1, 10)
    t.same(records.map((x) => x.payload), payloads, name)
    t.same(records.map((x) => x.seq), payloads.map((_, i) => headBefore + 1 + i), `${name}: seqs`)
    for (const record of records) t.notOk(Object.hasOwn(record, 'schemaVersion'), `${name}: no schema_version header`)
  }
})

t.test('DECISIONS §3 edge cases through HTTP: refusals with exact bodies', async (t) => {
  const cases: Array<[Record<string, unknown>, string, string, unknown]> = [
    [{ ip: 'fe80::1%eth0' }, 'ip', 'zone ids are not allowed', 'fe80::1%eth0'],
    [{ ip: '010.1.1.1' }, 'ip', 'IPv4 octets with leading zeros are not allowed', '010.1.1.1'],
    [{ ip: '0x0a000001' }, 'ip', 'IPv4 addresses in hex form are not allowed', '0x0a000001'],
    [{ ip: '167772161' }, 'ip', 'IPv4 addresses in integer form are not allowed', '167772161'],
    [{ ip: '10.0.0.0/33' }, 'ip', 'prefix length 33 is out of range for IPv4', '10.0.0.0/33'],
    [{ ip: '10.0.0.1\t' }, 'ip', 'whitespace and control characters are not allowed', '10.0.0.1\t'],
    [{ ip: '10.0.0.0/7' }, 'ip', 'IPv4 prefixes shorter than /8 are refused', '10.0.0.0/7'],
    [{ ip: '2000::/11' }, 'ip', 'IPv6 prefixes shorter than /12 are refused', '2000::/11'],
    [{ ip: '' }, '', 'exactly one of ip, asn, country is required (none was given)', { ip: '' }],
    [{ asn: 'AS0' }, 'asn', 'must be AS<digits> with a number from 1 to 4294967295', 'AS0'],
    [{ asn: 'AS4294967296' }, 'asn', 'must be AS<digits> with a number from 1 to 4294967295', 'AS4294967296'],
    [{ asn: 'AS64512' }, 'asn', 'AS64512 is not in the ASN database', 'AS64512'],
    [{ country: 'UK' }, 'country', 'must be an ISO-3166 alpha-2 code', 'UK'],
    [{ country: 'EU' }, 'country', 'must be an ISO-3166 alpha-2 code', 'EU'],
    [{ ip: '192.0.2.1', expiration: -60 }, 'expiration', 'must not be negative', -60],
    [{ ip: '192.0.2.1', asn: 'AS1221' }, '', 'exactly one of ip, asn, country is allowed (got ip, asn)', { ip: '192.0.2.1', asn: 'AS1221' }],
  ]
  for (const [fields, path, message, value] of cases) {
    const r = await post(srv, 'v1', [block(fields)])
    t.same([r.status, r.body], [400, { error: 'ValidationError', message: 'Validation failed', code: 400, details: [{ field: path === '' ? '[0]' : `[0].${path}`, message, value }] }], JSON.stringify(fields))
  }
})

t.test('DECISIONS §3 edge cases through HTTP: normalized targets as stored', async (t) => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ ip: '::ffff:198.51.100.77' }, '198.51.100.77/32'],
    [{ ip: '10.20.30.40/8' }, '10.0.0.0/8'],
    [{ ip: '2001:DB8:0:0:1:0:0:1' }, '2001:db8::1:0:0:1/128'],
    [{ ip: '2001:db8::/32' }, '2001:db8::/32'],
    [{ asn: 'as0721' }, 'AS721'],
    [{ country: 'jp' }, 'JP'],
  ]
  const r = await post(srv, 'v1', cases.map(([fields]) => block(fields)))
  t.equal(r.status, 200)
  await settle()
  const stored = new Set((await accessRules()).map((x) => x.target.value))
  for (const [fields, value] of cases) t.ok(stored.has(value), `${JSON.stringify(fields)} → ${value}`)
})
