/**
 * Rules both versions share once an entry has passed its schema: the expiry policy (SPEC 2.1,
 * §8, DECISIONS §3) and labels (limits, confidence and severity).
 */
import type { Confidence, Severity } from '../store/types.js'
import type { Command, Labels } from './commands.js'
import { MAX_LABELS_JSON_BYTES } from './schemas.js'
import type { TargetChecks } from './targets.js'
import type { EntryFailure } from './validators.js'

export const DEFAULT_BLOCK_EXPIRY_SECONDS = 86_400
export const MIN_EXPIRY_SECONDS = 60

export interface EntryChecks extends TargetChecks {
  /**
   * Whether to run the expression checker. The consumer re-reads payloads that were checked when
   * they were accepted, so it turns this off together with `asnExists` (the ASN database may
   * have changed since; an accepted entry stays accepted).
   */
  readonly checkExpressions: boolean
}

export type NormalizeResult =
  | { readonly ok: true, readonly command: Command }
  | { readonly ok: false, readonly failure: EntryFailure }

export function failure (path: string, message: string, value: unknown): NormalizeResult {
  return { ok: false, failure: { path, message, value: value === undefined ? null : value } }
}

export function isPlainObject (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

type Expiry = { ok: true, seconds: number | null } | { ok: false, result: NormalizeResult }

/**
 * Access rules: a block without expiry (absent or 0) lapses after one day, an allow without
 * expiry never does; any positive value is floored at 60 s; negative values fail.
 */
export function accessExpiry (seconds: number | undefined, action: 'block' | 'allow', path: string): Expiry {
  if (seconds !== undefined && seconds < 0) return { ok: false, result: failure(path, 'must not be negative', seconds) }
  if (seconds === undefined || seconds === 0) return { ok: true, seconds: action === 'block' ? DEFAULT_BLOCK_EXPIRY_SECONDS : null }
  return { ok: true, seconds: Math.max(MIN_EXPIRY_SECONDS, seconds) }
}

/** Expression rules: 0 or absent means no expiry; positive values are kept as sent. */
export function expressionExpiry (seconds: number | undefined, path: string): Expiry {
  if (seconds !== undefined && seconds < 0) return { ok: false, result: failure(path, 'must not be negative', seconds) }
  return { ok: true, seconds: seconds === undefined || seconds === 0 ? null : seconds }
}

export type LabelsResult =
  | { ok: true, labels: Labels, confidence: Confidence | null, severity: Severity | null }
  | { ok: false, result: NormalizeResult }

const EMPTY_LABELS: LabelsResult = Object.freeze({ ok: true, labels: Object.freeze({}) as Labels, confidence: null, severity: null })

/**
 * Labels after their schema (≤ 64 keys, scalar values, confidence/severity values): the 4 KiB
 * cap, and confidence/severity lowercased both in the labels (list selectors match them) and as
 * the rule's own values.
 */
export function normalizeLabels (labels: Record<string, string | number | boolean> | undefined): LabelsResult {
  if (labels === undefined) return EMPTY_LABELS
  const out: Labels = {}
  // A cheap upper bound first (6 bytes per character covers the longest JSON escape, 24 any
  // number or boolean): the exact size costs a JSON.stringify, needed only near the cap.
  let bound = 2
  for (const key of Object.keys(labels)) {
    const v = labels[key]!
    out[key] = v
    bound += key.length * 6 + 4 + (typeof v === 'string' ? v.length * 6 + 2 : 24)
  }
  if (bound > MAX_LABELS_JSON_BYTES) {
    const bytes = Buffer.byteLength(JSON.stringify(labels))
    if (bytes > MAX_LABELS_JSON_BYTES) {
      return { ok: false, result: failure('labels', `must be at most ${MAX_LABELS_JSON_BYTES} bytes as JSON (got ${bytes})`, labels) }
    }
  }
  let confidence: Confidence | null = null
  let severity: Severity | null = null
  if (typeof labels.confidence === 'string') out.confidence = confidence = labels.confidence.toLowerCase() as Confidence
  if (typeof labels.severity === 'string') out.severity = severity = labels.severity.toLowerCase() as Severity
  return { ok: true, labels: out, confidence, severity }
}
