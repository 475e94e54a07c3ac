/**
 * Fuzzing through HTTP: thousands of random garbage bodies (bytes, binary strings, random JSON,
 * random entry-like objects, mutated valid batches) never crash the server and always get a
 * spec-shaped answer: 200/206 with the batch response (SPEC 2.5) or 400 with the error body
 * (SPEC 2.6), never a 500.
 */
import t from 'tap'
import fc from 'fast-check'
import { type Answer, post, startTestServer } from '../helpers/server.js'

const srv = await startTestServer({ frontThreads: true })
t.teardown(() => srv.close())

function isSpecShaped (api: 'v1' | 'v2', r: Answer): boolean {
  const b = r.body as Record<string, unknown>
  if (r.status === 200 || r.status === 206) {
    if (typeof b.success !== 'boolean' || b.success !== (r.status === 200)) return false
    if (typeof b.message !== 'string' || !/^Processed \d+ entries, \d+ failed$/.test(b.message)) return false
    if (api === 'v2' && !Array.isArray(b.errors)) return false
    return r.status === 200 || (Array.isArray(b.errors) && b.errors.length > 0 && b.errors.every((e) => typeof e === 'string' && /^Entry \d+: ./.test(e)))
  }
  if (r.status !== 400 || typeof b.error !== 'string' || typeof b.message !== 'string' || b.code !== 400) return false
  return b.details === undefined || (Array.isArray(b.details) && b.details.every((d: { field?: unknown, message?: unknown }) => typeof d.field === 'string' && /^\[\d+\]/.test(d.field) && typeof d.message === 'string'))
}

const garbage: fc.Arbitrary<Uint8Array | string> = fc.oneof(
  fc.uint8Array({ maxLength: 200 }),
  fc.string({ maxLength: 200, unit: 'binary' }),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.array(fc.dictionary(fc.constantFrom('type', 'action', 'ip', 'asn', 'country', 'kind', 'op', 'rule', 'rule_ref', 'labels', 'expires_in', '__proto__', '$gt', 'x'), fc.jsonValue({ maxDepth: 3 })), { maxLength: 5 }).map((v) => JSON.stringify(v)),
  fc.tuple(fc.constantFrom(
    '[{"type":"access_rules","action":"block","ip":"10.0.0.1"}]',
    '[{"kind":"waf_rule","op":"upsert","rule_ref":"r","rule":{"type":"custom","expression":"http.host eq \\"a\\"","action":"block"}}]',
  ), fc.nat(), fc.string({ maxLength: 4 })).map(([s, at, ins]) => s.slice(0, at % s.length) + ins + s.slice(at % s.length)),
)

const api = fc.constantFrom('v1', 'v2') as fc.Arbitrary<'v1' | 'v2'>

t.test('2000 random garbage bodies: never a crash, always a spec-shaped answer', async (t) => {
  let answered = 0
  // Groups of 20 sent at once: the store's disk flushes overlap, and a failing group still shrinks.
  await fc.assert(fc.asyncProperty(fc.array(fc.tuple(garbage, api), { minLength: 20, maxLength: 20 }), async (group) => {
    const answers = await Promise.all(group.map(async ([body, v]) => ({ v, r: await post(srv, v, typeof body === 'string' ? body : Buffer.from(body)) })))
    answered += answers.length
    return answers.every(({ v, r }) => isSpecShaped(v, r))
  }), { numRuns: 100 })
  t.equal(answered, 2000)
  t.equal((await fetch(`${srv.url}/healthz`)).status, 200, 'still up')
})
