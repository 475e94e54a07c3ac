import t from 'tap'
import { registry, ThreatfeedError, toThreatfeedError, isThreatfeedError } from '../src/errors.js'

t.test('every registry entry has a TF_ERR_ code, an HTTP status, a fault and a class name', async (t) => {
  for (const [code, d] of Object.entries(registry)) {
    t.match(code, /^TF_ERR_[A-Z0-9_]+$/, code)
    t.ok(d.status >= 400 && d.status <= 599, `${code} status`)
    t.ok(['caller', 'dependency', 'internal'].includes(d.fault), `${code} fault`)
    t.match(d.name, /^[A-Z][A-Za-z]+Error$/, `${code} name`)
    // A held feed is a 503 the operator's guard decided: its message is shown, and not logged per poll.
    if (d.fault === 'caller') t.ok(d.status < 500 || code === 'TF_ERR_CONFIG' || code === 'TF_ERR_FEED_HELD', `${code}: caller faults are 4xx`)
    if (d.fault !== 'caller') t.ok(d.status >= 500, `${code}: dependency and internal faults are 5xx`)
  }
})

t.test('message templates are filled in order', async (t) => {
  const e = new ThreatfeedError('TF_ERR_GEO_LOAD', ['/x.mmdb', 'bad metadata'])
  t.equal(e.message, 'cannot load geo database /x.mmdb: bad metadata')
  t.equal(e.status, 500)
  t.equal(e.code, 'TF_ERR_GEO_LOAD')
  t.equal(e.errorName, 'GeoDatabaseError')
  t.ok(isThreatfeedError(e))
})

t.test('unknown errors become a generic internal error carrying the cause', async (t) => {
  const cause = new TypeError('boom')
  const e = toThreatfeedError(cause)
  t.equal(e.code, 'TF_ERR_INTERNAL')
  t.equal(e.message, 'internal server error')
  t.equal(e.cause, cause)
  t.equal(toThreatfeedError(e), e)
})

t.test('the number of codes is pinned: a new code is a decision, made here too', async (t) => {
  t.equal(Object.keys(registry).length, 34)
})

t.test('statuses pinned', async (t) => {
  t.same(Object.fromEntries(Object.entries(registry).map(([k, v]) => [k, v.status])), {
    TF_ERR_CONFIG: 500,
    TF_ERR_INTERNAL: 500,
    TF_ERR_UNAUTHORIZED: 401,
    TF_ERR_UNAUTHORIZED_FORM: 401,
    TF_ERR_UNAUTHORIZED_SCOPE: 401,
    TF_ERR_UNAUTHORIZED_SUBSCRIPTION: 401,
    TF_ERR_CLIENT_CERT_REQUIRED: 401,
    TF_ERR_PAYMENT_REQUIRED: 402,
    TF_ERR_FORBIDDEN: 403,
    TF_ERR_ADMIN_ALL_LOCAL: 403,
    TF_ERR_NOT_FOUND: 404,
    TF_ERR_METHOD_NOT_ALLOWED: 405,
    TF_ERR_RATE_LIMITED: 429,
    TF_ERR_VALIDATION: 400,
    TF_ERR_BAD_REQUEST: 400,
    TF_ERR_RULE_TYPE_REQUIRED: 400,
    TF_ERR_FEED_BAD_PARAM: 400,
    TF_ERR_LIST_NOT_FOUND: 404,
    TF_ERR_LIST_AMBIGUOUS: 409,
    TF_ERR_FEED_TOO_LARGE: 413,
    TF_ERR_FEED_UNAVAILABLE: 500,
    TF_ERR_FEED_HELD: 503,
    TF_ERR_STORE_UNAVAILABLE: 500,
    TF_ERR_STORE_CONFLICT: 409,
    TF_ERR_APPEND_OUTCOME_UNKNOWN: 500,
    TF_ERR_IDEMPOTENCY_KEY_REUSED: 400,
    TF_ERR_WORKSPACE_NOT_FOUND: 404,
    TF_ERR_KEY_NOT_FOUND: 404,
    TF_ERR_INVALID_ARGUMENT: 400,
    TF_ERR_NET_PARSE: 400,
    TF_ERR_GEO_LOAD: 500,
    TF_ERR_GEO_MISSING: 500,
    TF_ERR_WORKER: 500,
    TF_ERR_WORKER_TIMEOUT: 500,
  })
})
