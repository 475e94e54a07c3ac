/**
 * The compiled schema validators (generated from schemas.ts by scripts/generate-validators.ts)
 * and the one translation of an Ajv error into an entry failure: a dotted path, a message and
 * the offending value, as SPEC 2.5 (`Entry <i>: <path>: <message>`) and SPEC 2.6 (`details`)
 * need them. Ajv's own messages are compiled out (`messages: false`): these read better and are
 * pinned by tests.
 */
import * as generated from './generated/validators.js'
import { PATTERN_MESSAGES, type SchemaName } from './schemas.js'

/** Why one entry failed. `path` is dotted from the entry root ('' for the entry itself). */
export interface EntryFailure {
  readonly path: string
  readonly message: string
  /** The offending input value (null when the value is missing). */
  readonly value: unknown
}

interface SchemaError {
  readonly instancePath: string
  readonly keyword: string
  readonly params: Record<string, unknown>
}

type ValidateFunction = ((data: unknown) => boolean) & { errors?: SchemaError[] | null }

const validators = generated as unknown as Record<SchemaName, ValidateFunction>

/**
 * Validates `data` against one schema; null when it conforms, else its first failure with the
 * path prefixed by `prefix` (e.g. 'rule' for a rule body).
 *
 * @example
 *   checkSchema('SignalEventV1', { type: 'access_rules' }, '')
 *   // { path: 'action', message: 'is required', value: null }
 */
export function checkSchema (name: SchemaName, data: unknown, prefix: string): EntryFailure | null {
  const validate = validators[name]
  if (validate(data)) return null
  const error = validate.errors?.[0]
  if (error === undefined) return { path: prefix, message: 'is invalid', value: data }
  return describe(error, data, prefix)
}

function describe (error: SchemaError, root: unknown, prefix: string): EntryFailure {
  const segments = error.instancePath === '' ? [] : error.instancePath.slice(1).split('/').map(unescapePointer)
  const at = valueAt(root, segments)
  const path = joinPath(prefix, segments)
  const p = error.params
  switch (error.keyword) {
    case 'required':
      return { path: joinPath(path, [String(p.missingProperty)]), message: 'is required', value: null }
    case 'additionalProperties': {
      const field = String(p.additionalProperty)
      return { path: joinPath(path, [field]), message: 'is not an allowed field', value: valueAt(at, [field]) ?? null }
    }
    case 'type':
      return { path, message: `must be ${typeNames(p.type)}`, value: at }
    case 'const':
      return { path, message: `must be ${JSON.stringify(p.allowedValue)}`, value: at }
    case 'enum':
      return { path, message: `must be one of ${(p.allowedValues as unknown[]).join(', ')}`, value: at }
    case 'pattern':
      return { path, message: PATTERN_MESSAGES.get(String(p.pattern)) ?? `must match ${String(p.pattern)}`, value: at }
    case 'maxLength':
      return { path, message: `must be at most ${String(p.limit)} characters`, value: at }
    case 'minLength':
      return { path, message: `must be at least ${String(p.limit)} characters`, value: at }
    case 'maximum':
      return { path, message: `must be at most ${String(p.limit)}`, value: at }
    case 'minimum':
      return { path, message: `must be at least ${String(p.limit)}`, value: at }
    case 'maxProperties':
      return { path, message: `must have at most ${String(p.limit)} keys`, value: at }
    default:
      return { path, message: `is invalid (${error.keyword})`, value: at }
  }
}

const ARTICLES: Record<string, string> = {
  string: 'a string', integer: 'an integer', number: 'a number', boolean: 'a boolean', object: 'an object', array: 'an array', null: 'null',
}

function typeNames (type: unknown): string {
  const names = (Array.isArray(type) ? type : String(type).split(',')).map((t: string) => ARTICLES[t] ?? t)
  return names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} or ${names.at(-1)!}`
}

/** RFC 6901 §4: `~1` is '/', `~0` is '~'. */
function unescapePointer (s: string): string {
  return s.includes('~') ? s.replace(/~1/g, '/').replace(/~0/g, '~') : s
}

function valueAt (root: unknown, segments: readonly string[]): unknown {
  let v = root
  for (const s of segments) {
    if (typeof v !== 'object' || v === null || !Object.hasOwn(v, s)) return undefined
    v = (v as Record<string, unknown>)[s]
  }
  return v
}

/** 'rule' + ['target', 'ip'] → 'rule.target.ip'; '' + ['asn'] → 'asn'. */
export function joinPath (prefix: string, segments: readonly string[]): string {
  let path = prefix
  for (const s of segments) path = path === '' ? s : `${path}.${s}`
  return path
}
