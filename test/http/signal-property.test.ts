/**
 * Property test through HTTP: random batches mixing valid and invalid entries get exactly the
 * right counts and messages, and every acknowledged entry is in the store afterwards (SPEC 2.5,
 * 2.6, 7.1). Garbage bodies: signal-garbage.test.ts.
 */
import t from 'tap'
import fc from 'fast-check'
import { post, startTestServer, withoutReceipt } from '../helpers/server.js'
import type { AccessRule } from '../../src/store/types.js'

const srv = await startTestServer({ frontThreads: true })
t.teardown(() => srv.close())

interface Case { entry: unknown, reason: string | null, target?: string }

let serial = 0
/** A fresh host address per valid entry, so each acknowledged entry is its own rule. */
const freshIp = (): string => { serial++; return `10.${(serial >> 16) & 255}.${(serial >> 8) & 255}.${serial & 255}` }

const valid: fc.Arbitrary<() => Case> = fc.constantFrom<() => Case>(
  () => { const ip = freshIp(); return { entry: { type: 'access_rules', action: 'block', ip }, reason: null, target: `${ip}/32` } },
  () => { const ip = freshIp(); return { entry: { type: 'access_rules', action: 'block', ip: `::ffff:${ip}`, expiration: 5 }, reason: null, target: `${ip}/32` } },
  () => ({ entry: { type: 'access_rules', action: 'block', country: 'ch', name: 'x' }, reason: null, target: 'CH' }),
  () => ({ entry: { type: 'access_rules', action: 'block', asn: 'AS1221', description: 'd' }, reason: null, target: 'AS1221' }),
)
const invalid: fc.Arbitrary<() => Case> = fc.constantFrom<() => Case>(
  () => ({ entry: { type: 'access_rules', action: 'block', country: 'XX' }, reason: 'country: must be an ISO-3166 alpha-2 code' }),
  () => ({ entry: { type: 'access_rules', action: 'block', asn: 'AS64512' }, reason: 'asn: AS64512 is not in the ASN database' }),
  () => ({ entry: { type: 'access_rules', action: 'block', ip: '1.2.3.4/0' }, reason: 'ip: IPv4 prefixes shorter than /8 are refused' }),
  () => ({ entry: { type: 'access_rules', action: 'block' }, reason: 'exactly one of ip, asn, country is required (none was given)' }),
  () => ({ entry: { type: 'access_rules', ip: '1.2.3.4' }, reason: 'action: is required' }),
  () => ({ entry: { type: 'access_rules', action: 'block', ip: '1.2.3.4', extra: 1 }, reason: 'extra: is not an allowed field' }),
  () => ({ entry: { type: 'access_rules', action: 'block', ip: '1.2.3.4', expiration: -3 }, reason: 'expiration: must not be negative' }),
  () => ({ entry: 'access_rules', reason: 'must be an object' }),
  () => ({ entry: { type: 'access_rules', action: 'block', ip: '1.2.3.4', $where: 'x' }, reason: '$where: key is not allowed (reserved name or starting with $)' }),
)

t.test('random mixed batches: exact counts and messages; acknowledged entries are stored', async (t) => {
  await fc.assert(fc.asyncProperty(fc.array(fc.oneof(valid, invalid), { minLength: 1, maxLength: 40 }), async (makers) => {
    const cases = makers.map((m) => m())
    const failed = cases.map((c, i) => ({ ...c, i })).filter((c) => c.reason !== null)
    const r = await post(srv, 'v1', cases.map((c) => c.entry))
    const message = `Processed ${cases.length} entries, ${failed.length} failed`
    if (failed.length === cases.length) {
      t.equal(r.status, 400)
      t.same(r.body, {
        error: 'ValidationError',
        message: 'Validation failed',
        code: 400,
        details: failed.map((f) => {
          const colon = f.reason!.indexOf(': ')
          const path = f.reason!.startsWith('exactly') || f.reason === 'must be an object' ? '' : f.reason!.slice(0, colon)
          const fieldMessage = path === '' ? f.reason : f.reason!.slice(colon + 2)
          return { field: path === '' ? `[${f.i}]` : `[${f.i}].${path}`, message: fieldMessage, value: (r.body as { details: Array<{ value: unknown }> }).details[failed.indexOf(f)]!.value }
        }),
      })
      return
    }
    const expected = failed.length === 0
      ? { success: true, message }
      : { success: false, message, errors: failed.map((f) => `Entry ${f.i}: ${f.reason!}`) }
    t.equal(r.status, failed.length === 0 ? 200 : 206)
    t.same(withoutReceipt(r.body), expected)
    await srv.consumer.waitFor(await srv.store.stream.head(), 1000)
    const stored = new Set(((await srv.store.rules.list(srv.workspace.id, 'access_rule', Date.now())) as AccessRule[]).map((x) => x.target.value))
    for (const c of cases) if (c.target !== undefined) t.ok(stored.has(c.target), `${c.target} is stored`)
  }), { numRuns: 60 })
})
