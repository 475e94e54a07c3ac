import t from 'tap'
import { SignalIngester, findMissingRuleType, type ApiVersion } from '../../src/ingest/batch.js'
import { checkContentType, parseBatch } from '../../src/ingest/parse-body.js'
import { ThreatfeedError } from '../../src/errors.js'
import { MemoryStream } from './memory-stream.js'

const checks = { asnExists: (asn: number) => asn === 1221, checkExpressions: true }

function setup (options: { appendTimeoutMs?: number } = {}) {
  const stream = new MemoryStream()
  const appended: number[] = []
  const ingester = new SignalIngester({ stream, checks, now: () => 1_700_000_000_000, onAppended: (b) => appended.push(b.seqs.at(-1)!), ...options })
  return { stream, appended, ingester }
}

/** The thrown ThreatfeedError's code, status and body parts, or the outcome. */
async function run (ingester: SignalIngester, api: ApiVersion, body: string | Buffer): Promise<unknown> {
  try {
    const out = await ingester.ingest(api, 'ws1', typeof body === 'string' ? Buffer.from(body) : body)
    // The receipt's id, a fresh UUID, is shown as UUID when it is the one the outcome names.
    const batch = out.body.batch === undefined ? undefined : { ...out.body.batch, id: out.body.batch.id === out.batchId && /^[0-9a-f-]{36}$/.test(out.batchId) ? 'UUID' : out.body.batch.id }
    return { status: out.status, body: { ...out.body, batch }, seqs: out.seqs }
  } catch (e) {
    if (!(e instanceof ThreatfeedError)) throw e
    return { code: e.code, status: e.status, message: e.message, details: e.details }
  }
}

const V1 = (extra: string) => `{"type":"access_rules","action":"block",${extra}}`

t.test('request-level refusals (400, nothing appended)', async (t) => {
  const bad = (message: string) => ({ code: 'TF_ERR_BAD_REQUEST', status: 400, message, details: undefined })
  const cases: Array<{ description: string, body: string | Buffer, expected: unknown }> = [
    { description: 'not JSON', body: '[{"type":', expected: bad('request body is not valid JSON') },
    { description: 'empty body', body: '', expected: bad('request body is not valid JSON') },
    { description: 'BOM', body: '\uFEFF[]', expected: bad('request body is not valid JSON') },
    { description: 'an object', body: V1('"ip":"10.0.0.1"'), expected: bad('request body must be a JSON array of signal entries') },
    { description: 'a string', body: '"[]"', expected: bad('request body must be a JSON array of signal entries') },
    { description: 'null', body: 'null', expected: bad('request body must be a JSON array of signal entries') },
    { description: '0 entries', body: '[]', expected: bad('batch must contain 1 to 1000 entries (got 0)') },
    { description: '1001 entries', body: `[${Array(1001).fill(V1('"ip":"10.0.0.1"')).join(',')}]`, expected: bad('batch must contain 1 to 1000 entries (got 1001)') },
    { description: 'invalid UTF-8', body: Buffer.concat([Buffer.from('[{"type":"access_rules","action":"block","ip":"10.0.0.1","name":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}]')]), expected: bad('request body is not valid UTF-8') },
    { description: 'overlong UTF-8', body: Buffer.from([0x5b, 0xc0, 0xaf, 0x5d]), expected: bad('request body is not valid UTF-8') },
    { description: 'deep nesting', body: '['.repeat(100_000) + ']'.repeat(100_000), expected: { code: 'TF_ERR_VALIDATION', status: 400, message: 'Validation failed', details: [{ field: '[0]', message: 'must be an object', value: null }] } },
    { description: 'nesting within the limit is echoed', body: '[' + '['.repeat(32) + ']'.repeat(32) + ']', expected: { code: 'TF_ERR_VALIDATION', status: 400, message: 'Validation failed', details: [{ field: '[0]', message: 'must be an object', value: JSON.parse('['.repeat(32) + ']'.repeat(32)) as unknown }] } },
  ]
  for (const c of cases) {
    const { ingester, stream } = setup()
    t.same(await run(ingester, 'v1', c.body), c.expected, c.description)
    t.equal(stream.records.length, 0, `${c.description}: nothing appended`)
  }
})

t.test('batch outcomes and bodies', async (t) => {
  const { ingester, stream, appended } = setup()
  t.same(await run(ingester, 'v1', `[${V1('"ip":"10.0.0.1"')},${V1('"asn":"AS1221"')}]`), {
    status: 200, body: { success: true, message: 'Processed 2 entries, 0 failed', batch: { id: 'UUID', first_seq: 1, last_seq: 2 } }, seqs: [1, 2],
  }, 'v1 200 has no errors')
  t.same(await run(ingester, 'v1', `[${V1('"ip":"10.0.0.2"')},${V1('"asn":"AS64512"')},${V1('"country":"xx"')}]`), {
    status: 206,
    body: { success: false, message: 'Processed 3 entries, 2 failed', errors: ['Entry 1: asn: AS64512 is not in the ASN database', 'Entry 2: country: must be an ISO-3166 alpha-2 code'], batch: { id: 'UUID', first_seq: 3, last_seq: 3 } },
    seqs: [3],
  }, 'v1 206, 0-based indexes')
  t.same(await run(ingester, 'v1', `[${V1('"asn":"AS64512"')},{"type":"access_rules"},7]`), {
    code: 'TF_ERR_VALIDATION',
    status: 400,
    message: 'Validation failed',
    details: [
      { field: '[0].asn', message: 'AS64512 is not in the ASN database', value: 'AS64512' },
      { field: '[1].action', message: 'is required', value: null },
      { field: '[2]', message: 'must be an object', value: 7 },
    ],
  }, 'every entry failed → 400 ValidationError')
  t.same(await run(ingester, 'v2', '[{"kind":"access_rule","op":"delete","rule_ref":"a"}]'), {
    status: 200, body: { success: true, message: 'Processed 1 entries, 0 failed', errors: [], batch: { id: 'UUID', first_seq: 4, last_seq: 4 } }, seqs: [4],
  }, 'v2 200 always has errors')
  const ids = stream.records.map((r) => r.batchId)
  t.ok(ids[0] !== undefined && ids[0] === ids[1] && new Set(ids).size === 3, 'each append is stored with its own batch id, on every record')
  t.same(appended, [2, 3, 4], 'the consumer is nudged with the last seq of each append')
  t.same(stream.records.map((r) => r.acceptedAt), [1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_000])
})

t.test('a v1 stream record is the entry text byte for byte, without a schema_version', async (t) => {
  const { ingester, stream } = setup()
  const entries = [
    '{ "type" : "access_rules",\n  "action":"block", "ip":"10.0.0.1/8", "expiration": 1e2 }',
    '{"type":"access_rules","action":"block","country":"X"}',
    '{"type":"\\u0061ccess_rules","action":"block","name":"caf\\u00e9 é 😀","asn":"as1221"}',
  ]
  const body = `[\n  ${entries[0]} ,\t${entries[1]},${entries[2]}\r\n]`
  const out = await run(ingester, 'v1', body) as { status: number }
  t.equal(out.status, 206)
  t.same(stream.records.map((r) => r.payload), [entries[0], entries[2]])
  t.same(stream.records.map((r) => Object.hasOwn(r, 'schemaVersion')), [false, false])
  t.ok(Buffer.from(body).includes(Buffer.from(stream.records[1]!.payload)), 'the same bytes as in the body')
})

t.test('v2 records carry schema_version 2 and the canonical envelope', async (t) => {
  const { ingester, stream } = setup()
  await run(ingester, 'v2', '[{"kind":"access_rule","op":"upsert","rule":{"target":{"ip":"10.0.0.1/8"}},"expires_in":10,"labels":{"confidence":"HIGH"}}]')
  t.same(stream.records.map((r) => ({ v: r.schemaVersion, p: r.payload })), [{
    v: 2, p: '{"schema_version":2,"kind":"access_rule","op":"upsert","expires_in":60,"labels":{"confidence":"high"},"rule":{"target":{"ip":"10.0.0.0/8"},"action":"block"}}',
  }])
})

t.test('v2: a missing or empty rule.type rejects the whole batch', async (t) => {
  const good = '{"kind":"access_rule","op":"upsert","rule":{"target":{"ip":"10.0.0.1"}}}'
  const rule = (type: string) => `{"kind":"waf_rule","op":"upsert","rule_ref":"r","rule":{${type}"expression":"http.host eq \\"x\\"","action":"block"}}`
  const cases = [
    { description: 'missing', entry: rule(''), value: null },
    { description: 'empty', entry: rule('"type":"",'), value: '' },
    { description: 'null', entry: rule('"type":null,'), value: null },
    { description: 'smart firewall', entry: rule('').replace('waf_rule', 'smart_firewall_rule'), value: null },
  ]
  for (const c of cases) {
    const { ingester, stream } = setup()
    t.same(await run(ingester, 'v2', `[${good},${c.entry}]`), {
      code: 'TF_ERR_RULE_TYPE_REQUIRED',
      status: 400,
      message: 'rule.type is required and must be one of custom, generated',
      details: [{ field: '[1].rule.type', message: 'is required and must be one of custom, generated', value: c.value }],
    }, c.description)
    t.equal(stream.records.length, 0, `${c.description}: nothing of the batch is applied`)
  }
  t.equal(findMissingRuleType([{ kind: 'waf_rule', op: 'delete', rule_ref: 'r' }, { kind: 'waf_rule', op: 'upsert', rule: 'x' }, null, 3]), null, 'deletes and malformed entries are left to the entry checks')
  const { ingester } = setup()
  t.same(await run(ingester, 'v2', `[${rule('"type":"other",')}]`), {
    code: 'TF_ERR_VALIDATION', status: 400, message: 'Validation failed', details: [{ field: '[0].rule.type', message: 'must be one of custom, generated', value: 'other' }],
  }, 'a wrong rule.type is an entry failure')
  t.same(await run(ingester, 'v1', `[${rule('')}]`), {
    code: 'TF_ERR_VALIDATION', status: 400, message: 'Validation failed', details: [{ field: '[0].type', message: 'is required', value: null }],
  }, 'the v1 path knows nothing of it')
})

t.test('store failures answer 500, never a success', async (t) => {
  const failing = setup()
  failing.stream.appendHook = async () => { throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE') }
  t.match(await run(failing.ingester, 'v1', `[${V1('"ip":"10.0.0.1"')}]`), { code: 'TF_ERR_STORE_UNAVAILABLE', status: 500 })
  const hanging = setup({ appendTimeoutMs: 50 })
  let release: () => void = () => {}
  hanging.stream.appendHook = () => new Promise<void>((resolve) => { release = resolve })
  const started = Date.now()
  t.match(await run(hanging.ingester, 'v1', `[${V1('"ip":"10.0.0.1"')}]`), { code: 'TF_ERR_STORE_UNAVAILABLE', status: 500 })
  t.ok(Date.now() - started < 1000, 'within the timeout')
  t.same(hanging.appended, [], 'the consumer is not nudged')
  release()
})

t.test('Content-Type', async (t) => {
  const ok = ['', 'application/json', 'Application/JSON', 'application/json; charset=utf-8', ' application/json ;x=y']
  const bad = ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx', 'multipart/form-data; boundary=x', 'json']
  for (const h of ok) t.doesNotThrow(() => checkContentType(h), JSON.stringify(h))
  for (const h of bad) {
    t.throws(() => checkContentType(h), { code: 'TF_ERR_BAD_REQUEST', message: 'Content-Type must be application/json' }, JSON.stringify(h))
  }
  t.same(parseBatch(Buffer.from(' [1] ')).entries, [1])
})
