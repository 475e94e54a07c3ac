/**
 * The error registry: every error the service can report has a stable code, a message
 * template and an HTTP status. Status is decided here and nowhere else (fastify's
 * lib/errors.js is the model). Imports nothing.
 *
 * Errors are grouped by who is at fault, as the MongoDB driver does:
 * - `caller`: the request or the command line is wrong (4xx, the message is safe to show);
 * - `dependency`: the store or a geo database is unavailable (5xx, retryable);
 * - `internal`: our bug (500, logged with its cause, generic body).
 */

export type Fault = 'caller' | 'dependency' | 'internal'

interface Definition {
  readonly status: number
  readonly fault: Fault
  /** Message template; `%s` placeholders are filled in order from the arguments. */
  readonly template: string
  /** Error class name written in API error bodies (SPEC 2.6 `error`). */
  readonly name: string
}

function def (status: number, fault: Fault, name: string, template: string): Definition {
  return Object.freeze({ status, fault, name, template })
}

export const registry = Object.freeze({
  // --- configuration and start-up ---
  TF_ERR_CONFIG: def(500, 'caller', 'ConfigError', 'invalid configuration: %s'),
  TF_ERR_INTERNAL: def(500, 'internal', 'InternalError', 'internal server error'),

  // --- authentication and tenancy (DECISIONS §2) ---
  TF_ERR_UNAUTHORIZED: def(401, 'caller', 'UnauthorizedError', 'invalid or missing API key'),
  // The signal routes asked with another form of the key than theirs (signal-routes.ts).
  TF_ERR_UNAUTHORIZED_FORM: def(401, 'caller', 'UnauthorizedError', 'invalid or missing API key: %s'),
  // v2 may only answer 200/206/400/401, so its scope and subscription failures are 401s that say which.
  TF_ERR_UNAUTHORIZED_SCOPE: def(401, 'caller', 'UnauthorizedError', 'API key lacks the %s scope'),
  TF_ERR_UNAUTHORIZED_SUBSCRIPTION: def(401, 'caller', 'UnauthorizedError', 'subscription required: the workspace subscription is inactive'),
  TF_ERR_CLIENT_CERT_REQUIRED: def(401, 'caller', 'UnauthorizedError', 'a client certificate is required'),
  TF_ERR_PAYMENT_REQUIRED: def(402, 'caller', 'PaymentRequiredError', 'subscription required'),
  TF_ERR_FORBIDDEN: def(403, 'caller', 'ForbiddenError', 'API key lacks the %s scope'),
  // Issue 22: the one scope that crosses workspaces is granted only on the server's own machine.
  TF_ERR_ADMIN_ALL_LOCAL: def(403, 'caller', 'ForbiddenError', 'admin:all keys are made only on the server: threatfeed key create --scopes admin:all'),

  // --- HTTP infrastructure ---
  TF_ERR_NOT_FOUND: def(404, 'caller', 'NotFoundError', 'not found'),
  TF_ERR_METHOD_NOT_ALLOWED: def(405, 'caller', 'MethodNotAllowedError', 'method not allowed; use %s'),
  TF_ERR_RATE_LIMITED: def(429, 'caller', 'TooManyRequestsError', 'too many requests; retry after %s s'),

  // --- signal ingestion (DECISIONS §3) ---
  TF_ERR_VALIDATION: def(400, 'caller', 'ValidationError', 'Validation failed'),
  TF_ERR_BAD_REQUEST: def(400, 'caller', 'BadRequestError', '%s'),
  // Issue 33: a key names one batch; 400 (not the draft's 422) keeps v2 within SPEC 7.1's statuses.
  TF_ERR_IDEMPOTENCY_KEY_REUSED: def(400, 'caller', 'IdempotencyKeyReusedError', 'this Idempotency-Key was used with a different batch within the last 24 hours; use a new key for a new batch'),
  TF_ERR_RULE_TYPE_REQUIRED: def(400, 'caller', 'ValidationError', 'rule.type is required and must be one of custom, generated'),

  // --- feeds (DECISIONS §5) ---
  TF_ERR_FEED_BAD_PARAM: def(400, 'caller', 'BadRequestError', 'unsupported %s'),
  TF_ERR_LIST_NOT_FOUND: def(404, 'caller', 'NotFoundError', 'no such access-rules list'),
  TF_ERR_LIST_AMBIGUOUS: def(409, 'caller', 'ConflictError', 'list name matches more than one list; address it by UUID'),
  TF_ERR_FEED_TOO_LARGE: def(413, 'caller', 'PayloadTooLargeError', 'feed exceeds its entry limit'),
  // SPEC §7.2 lists no 503: a feed that cannot be built in time (store or workers failing) is a 500.
  TF_ERR_FEED_UNAVAILABLE: def(500, 'dependency', 'FeedUnavailableError', 'feed unavailable; retry shortly'),
  // A feed whose publish guard holds its first build has nothing to serve until an operator
  // accepts it: an operator's decision, not a failure (not reported per poll; the build logs it).
  // Answered with X-Feed-Held and Retry-After (respond.ts).
  TF_ERR_FEED_HELD: def(503, 'caller', 'FeedHeldError', 'feed held by publish guard %s before it ever published; publish the held build with `%s`'),

  // --- store (a dependency) ---
  TF_ERR_STORE_UNAVAILABLE: def(500, 'dependency', 'StoreUnavailableError', 'rule store unavailable'),
  TF_ERR_STORE_CONFLICT: def(409, 'caller', 'ConflictError', '%s'),
  // Issue 33: the stream commit was sent and its outcome could not be learnt (a failover outlasting
  // the lookup): unlike TF_ERR_STORE_UNAVAILABLE, this 500 does not promise "nothing was written".
  TF_ERR_APPEND_OUTCOME_UNKNOWN: def(500, 'dependency', 'OutcomeUnknownError', 'the batch may or may not have been stored (the database failed over during its commit); retry it with the same Idempotency-Key header to have it stored once'),

  // --- admin objects (CLI) ---
  TF_ERR_WORKSPACE_NOT_FOUND: def(404, 'caller', 'NotFoundError', 'no workspace with id %s'),
  TF_ERR_KEY_NOT_FOUND: def(404, 'caller', 'NotFoundError', 'no API key with id %s'),
  TF_ERR_INVALID_ARGUMENT: def(400, 'caller', 'UsageError', '%s'),

  // --- network math (src/net) ---
  TF_ERR_NET_PARSE: def(400, 'caller', 'ValidationError', '%s'),

  // --- geo databases (src/geo) ---
  TF_ERR_GEO_LOAD: def(500, 'dependency', 'GeoDatabaseError', 'cannot load geo database %s: %s'),
  // Also a worker's answer to a task naming a geo index version it does not hold (the pool then
  // sends the index along); it reaches a caller only when no index is loaded at all.
  TF_ERR_GEO_MISSING: def(500, 'dependency', 'GeoDatabaseError', 'no geo index for a task that names ASNs or countries: %s'),

  // --- worker pool (src/pool) ---
  TF_ERR_WORKER: def(500, 'internal', 'WorkerError', 'worker task failed: %s'),
  TF_ERR_WORKER_TIMEOUT: def(500, 'dependency', 'WorkerTimeoutError', 'worker task timed out after %s ms'),
})

export type ErrorCode = keyof typeof registry

function format (template: string, args: readonly unknown[]): string {
  let i = 0
  return template.replace(/%s/g, () => String(args[i++] ?? ''))
}

/**
 * The one error class the service throws on purpose. Its code selects status and fault from the
 * registry, so handlers only ever throw and the HTTP layer only ever maps.
 *
 * @example
 *   throw new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', [id])
 */
export class ThreatfeedError extends Error {
  readonly code: ErrorCode
  readonly status: number
  readonly fault: Fault
  readonly errorName: string
  /** Structured context for error bodies (SPEC 2.6 `details`, SPEC 2.9 `details`). */
  readonly details: unknown

  constructor (code: ErrorCode, args: readonly unknown[] = [], options: { cause?: unknown, details?: unknown } = {}) {
    const d = registry[code]
    super(format(d.template, args), options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'ThreatfeedError'
    this.code = code
    this.status = d.status
    this.fault = d.fault
    this.errorName = d.name
    this.details = options.details
  }
}

export function isThreatfeedError (e: unknown): e is ThreatfeedError {
  return e instanceof ThreatfeedError
}

/** Anything thrown that is not a registry error is our fault: wrap it so it maps to a generic 500. */
export function toThreatfeedError (e: unknown): ThreatfeedError {
  if (e instanceof ThreatfeedError) return e
  return new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: e })
}
