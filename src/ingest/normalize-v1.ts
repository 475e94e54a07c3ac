/**
 * A v1 signal event (SPEC 2.1) → a command. Identity is the target (DECISIONS §3): `block`
 * upserts the workspace's rule of that target, `unblock` removes every access rule of the target.
 *
 * The same function reads v1 stream records back in the consumer (the legacy path, SPEC §6), with
 * the checks against changing data turned off.
 */
import { accessExpiry, failure, isPlainObject, type EntryChecks, type NormalizeResult } from './entry-rules.js'
import { findForbiddenKey, isShallow } from './forbidden-keys.js'
import { normalizeTarget } from './targets.js'
import { checkSchema } from './validators.js'

/** The v1 event once it matches its schema. */
interface V1Event {
  type: 'access_rules'
  action: 'block' | 'unblock'
  ip?: string
  asn?: string
  country?: string
  expiration?: number
  description?: string
  name?: string
}

/**
 * @example
 *   normalizeV1({ type: 'access_rules', action: 'block', ip: '10.0.0.1/8' }, { asnExists: null, checkExpressions: false })
 *   // { ok: true, command: { kind: 'access_rule', op: 'upsert', target: { type: 'ip', value: '10.0.0.0/8' }, expiresIn: 86400, … } }
 */
export function normalizeV1 (entry: unknown, checks: EntryChecks): NormalizeResult {
  // The entry itself is the offending value, unless echoing it could overflow the serializer.
  if (!isPlainObject(entry)) return failure('', 'must be an object', isShallow(entry) ? entry : null)
  // The schema first: an entry it accepts holds only its known keys, with scalar values, so it
  // cannot hold a forbidden key or nest — the walk looking for them (a fifth of this function's
  // time) is left for entries the schema refuses, where a forbidden key is still the reason
  // given, as the order "forbidden keys, then schema" gives it.
  const schemaFailure = checkSchema('SignalEventV1', entry, '')
  if (schemaFailure !== null) return { ok: false, failure: findForbiddenKey(entry) ?? schemaFailure }
  const e = entry as unknown as V1Event

  const t = normalizeTarget(e, '', checks)
  if (!t.ok) return t
  if (e.action === 'unblock') {
    return { ok: true, command: { kind: 'access_rule', op: 'delete', ruleRef: null, target: t.target } }
  }
  const expiry = accessExpiry(e.expiration, 'block', 'expiration')
  if (!expiry.ok) return expiry.result
  return {
    ok: true,
    command: {
      kind: 'access_rule',
      op: 'upsert',
      ruleRef: null,
      target: t.target,
      action: 'block',
      name: e.name ?? null,
      reason: e.description ?? null,
      labels: {},
      confidence: null,
      severity: null,
      expiresIn: expiry.seconds,
    },
  }
}
