/**
 * The admin API's request and answer plumbing: JSON bodies checked by the compiled validators of
 * src/json/admin-schemas.ts, query parameters, cursor paging, and the one writer of admin answers
 * (every one with ADMIN_HEADERS, errors as SPEC 2.6 bodies).
 */
import type { HttpRequest } from 'uWebSockets.js'
import { ThreatfeedError, toThreatfeedError } from '../errors.js'
import * as validators from '../json/generated/admin-validators.js'
import type { AdminSchemaName } from '../json/admin-schemas.js'
import { checkContentType } from '../ingest/parse-body.js'
import type { Logger } from '../log.js'
import { ADMIN_HEADERS, refusedKeyOf, type AdminGate, type AdminCaller, type AdminRequestFacts } from './admin-access.js'
import type { AdminJournal } from './admin-journal.js'
import type { Method, Router } from './app.js'
import { readBody } from './body.js'
import { isRawTarget, rawTargetError } from './request-target.js'
import { sendError, sendJson, sendBody, type Exchange, type Headers } from './respond.js'

/** Admin bodies are small objects: a list with a 64-pair selector is a few KiB. */
export const ADMIN_MAX_BODY_BYTES = 64 * 1024

export interface Detail { field: string, message: string, value: unknown }

/** 400 with SPEC 2.6 `details`. */
export function invalid (details: Detail[]): ThreatfeedError {
  return new ThreatfeedError('TF_ERR_VALIDATION', [], { details })
}

interface AjvError { instancePath: string, keyword: string, message?: string, params: Record<string, unknown> }
type Validate = ((data: unknown) => boolean) & { errors?: AjvError[] | null }

const VALIDATORS: Record<AdminSchemaName, Validate> = {
  'admin-guards': validators.adminGuards as Validate,
  'admin-workspace-create': validators.adminWorkspaceCreate as Validate,
  'admin-workspace-update': validators.adminWorkspaceUpdate as Validate,
  'admin-key-create': validators.adminKeyCreate as Validate,
  'admin-list-create': validators.adminListCreate as Validate,
  'admin-list-update': validators.adminListUpdate as Validate,
  'admin-list-accept': validators.adminListAccept as Validate,
}

/** `/a/b` → `a.b`; a missing or unknown property names itself. */
function fieldOf (e: AjvError): string {
  const path = e.instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
  if (e.keyword === 'required') path.push(String(e.params.missingProperty))
  if (e.keyword === 'additionalProperties') path.push(String(e.params.additionalProperty))
  if (e.keyword === 'propertyNames') path.push(String(e.params.propertyName))
  return path.join('.')
}

function valueAt (body: unknown, e: AjvError): unknown {
  if (e.keyword === 'required') return null
  let v = body
  for (const p of e.instancePath.split('/').slice(1)) {
    if (typeof v !== 'object' || v === null) return null
    v = (v as Record<string, unknown>)[p.replace(/~1/g, '/').replace(/~0/g, '~')]
  }
  if (e.keyword === 'additionalProperties' && typeof v === 'object' && v !== null) return (v as Record<string, unknown>)[String(e.params.additionalProperty)] ?? null
  return v === undefined ? null : v
}

/** The body as `schema` allows it, or a 400 naming every problem. */
export function validateBody<T> (schema: AdminSchemaName, body: unknown): T {
  const validate = VALIDATORS[schema]
  if (validate(body)) return body as T
  const seen = new Set<string>()
  const details: Detail[] = []
  for (const e of validate.errors ?? []) {
    // anyOf [schema, null] reports both branches and the anyOf: one line per field and message.
    if (e.keyword === 'anyOf' || (e.keyword === 'type' && e.params.type === 'null')) continue
    if (e.keyword === 'propertyNames') continue // its `pattern` error below names the key
    const d = { field: fieldOf(e), message: e.message ?? e.keyword, value: valueAt(body, e) }
    const id = `${d.field}\u0000${d.message}`
    if (!seen.has(id)) { seen.add(id); details.push(d) }
  }
  throw invalid(details)
}

const HAS_BODY: ReadonlySet<string> = new Set(['post', 'put', 'patch'])
const NO_BODY: Promise<Buffer> = Promise.resolve(Buffer.alloc(0))

/** Parses a call's JSON body; an empty body is `{}`. */
export async function readJson (call: Pick<AdminCall, 'body' | 'contentType'>): Promise<unknown> {
  checkContentType(call.contentType)
  const raw = await call.body
  if (raw.byteLength === 0) return {}
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw)) as unknown
  } catch {
    throw new ThreatfeedError('TF_ERR_BAD_REQUEST', ['request body is not valid JSON'])
  }
}

/** The query's parameters; each of `single` at most once, anything else outside `allowed` is refused. */
export function readQuery (raw: string, allowed: readonly string[], repeatable: readonly string[] = []): URLSearchParams {
  const q = new URLSearchParams(raw)
  const details: Detail[] = []
  for (const k of new Set(q.keys())) {
    if (!allowed.includes(k)) details.push({ field: k, message: `unknown parameter; allowed: ${allowed.join(', ')}`, value: q.get(k) })
    else if (!repeatable.includes(k) && q.getAll(k).length > 1) details.push({ field: k, message: 'repeated parameter', value: q.getAll(k) })
  }
  if (details.length > 0) throw invalid(details)
  return q
}

export const MAX_PAGE = 500
export const DEFAULT_PAGE = 100

export interface Cursor { at: number, id: string }

export interface PageRequest { limit: number, before: Cursor | undefined }

/** `limit` (1..500, default 100) and `cursor` (a `next_cursor` as given). */
export function readPage (q: URLSearchParams): PageRequest {
  const details: Detail[] = []
  const rawLimit = q.get('limit')
  let limit = DEFAULT_PAGE
  if (rawLimit !== null) {
    limit = /^\d{1,6}$/.test(rawLimit) ? Number(rawLimit) : NaN
    if (!(limit >= 1 && limit <= MAX_PAGE)) details.push({ field: 'limit', message: `must be a whole number from 1 to ${MAX_PAGE}`, value: rawLimit })
  }
  const rawCursor = q.get('cursor')
  let before: Cursor | undefined
  if (rawCursor !== null) {
    before = decodeCursor(rawCursor) ?? undefined
    if (before === undefined) details.push({ field: 'cursor', message: 'is not a cursor this API gave', value: rawCursor })
  }
  if (details.length > 0) throw invalid(details)
  return { limit, before }
}

export function encodeCursor (c: Cursor): string {
  return Buffer.from(JSON.stringify([c.at, c.id])).toString('base64url')
}

function decodeCursor (text: string): Cursor | null {
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(text)) return null
  try {
    const v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown
    if (Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && typeof v[1] === 'string') return { at: v[0] as number, id: v[1] }
  } catch {
    // not JSON: not one of ours
  }
  return null
}

export function iso (ms: number | null | undefined): string | null {
  return ms === null || ms === undefined ? null : new Date(ms).toISOString()
}

/** What a handler is given: the exchange, the caller, the route parameters and the raw query. */
export interface AdminCall {
  readonly ex: Exchange
  readonly caller: AdminCaller
  readonly params: readonly string[]
  readonly query: string
  readonly contentType: string
  /**
   * The request's body, read from the moment the request arrived (POST, PUT and PATCH; empty for
   * the others): uWS delivers a body while the caller is still being authenticated, which may
   * await the store (a key created after the last reload), and a body reader attached after that
   * await would wait forever for chunks already gone.
   */
  readonly body: Promise<Buffer>
  /** After a change: this node's catalog reloads, so the answer's change already holds here. */
  readonly changed: () => Promise<void>
}

export interface AdminRoute {
  readonly method: Exclude<Method, 'any' | 'head' | 'options'>
  readonly pattern: string
  /** Metrics label. */
  readonly route: string
  /** Creating, updating and deleting workspaces take `admin:all`. */
  readonly needAll?: boolean
  /**
   * A write: its audit action (`list.create` …). The route audits what it changed; a refusal with
   * 403, 404 or 409 is audited here, with the path's id (or '') as the target.
   */
  readonly audit?: string
  readonly handle: (call: AdminCall) => Promise<void>
}

export function sendAdmin (ex: Exchange, status: number, body: unknown): void {
  sendJson(ex, status, body, ADMIN_HEADERS)
}

export function sendAdminText (ex: Exchange, status: number, body: string, contentType: string, headers: Headers): void {
  sendBody(ex, status, body, contentType, [...ADMIN_HEADERS, ...headers])
}

/**
 * Registers the routes: each checks the caller first, then runs; every answer, error or not,
 * carries ADMIN_HEADERS. Other methods on a pattern answer 405 with `Allow`.
 */
export function registerAdminRoutes (router: Router, gate: AdminGate, routes: readonly AdminRoute[], log: Logger, journal?: Pick<AdminJournal, 'audit'>): void {
  const report = (e: ThreatfeedError): void => { log.error({ err: e, cause: e.cause, code: e.code }, e.message) }
  const fail = (ex: Exchange, e: unknown): void => {
    const err = toThreatfeedError(e)
    const extra: Array<readonly [string, string]> = [...ADMIN_HEADERS]
    if (err.status === 429) extra.push(['Retry-After', String((err.details as { retryAfter?: number } | undefined)?.retryAfter ?? 1)])
    sendError(ex, err, 'signal', report, extra)
  }
  const byPattern = new Map<string, string[]>()
  for (const r of routes) {
    const methods = byPattern.get(r.pattern) ?? []
    methods.push(r.method === 'del' ? 'DELETE' : r.method.toUpperCase())
    byPattern.set(r.pattern, methods)
    const paramCount = (r.pattern.match(/:/g) ?? []).length
    router.on(r.method, r.pattern, r.route, 'signal', (ex, req) => {
      const facts: AdminRequestFacts = gate.facts(ex.res, req)
      const rawTarget = isRawTarget(req)
      const params: string[] = []
      for (let i = 0; i < paramCount; i++) params.push(decodeParameter(req.getParameter(i) ?? ''))
      const query = req.getQuery() ?? ''
      const contentType = req.getHeader('content-type')
      const body = HAS_BODY.has(r.method) ? readBody(ex, ADMIN_MAX_BODY_BYTES) : NO_BODY
      // A body the route never reads (refused caller, aborted client) must not become an unhandled rejection.
      body.catch(() => {})
      return (async () => {
        let caller: AdminCaller | null = null
        try {
          caller = await gate.check(facts, r.needAll === true)
          // After the gate: a target that is not ASCII is no way around the login limiter.
          if (rawTarget) throw rawTargetError()
          await r.handle({ ex, caller, params, query, contentType, body, changed: () => gate.changed() })
        } catch (e) {
          if (r.audit !== undefined && journal !== undefined) await auditRefusal(journal, r.audit, params[0] ?? '', facts, caller, e, log)
          if (!ex.aborted && !ex.ended) fail(ex, e)
        }
      })()
    }, { checksTarget: true })
  }
  for (const [pattern, methods] of byPattern) {
    if (methods.includes('GET')) methods.push('HEAD')
    const allow = methods.join(', ')
    const refuse = (ex: Exchange, req: HttpRequest): void => {
      if (isRawTarget(req)) fail(ex, rawTargetError())
      else sendError(ex, new ThreatfeedError('TF_ERR_METHOD_NOT_ALLOWED', [allow]), 'signal', report, [...ADMIN_HEADERS, ['Allow', allow]])
    }
    // Every admin answer carries the admin headers, a 400 for the target too.
    router.on('any', pattern, 'admin_method', 'signal', refuse, { checksTarget: true })
    if (!methods.includes('HEAD')) router.on('head', pattern, 'admin_method', 'signal', refuse, { checksTarget: true })
  }
}

/** Refusals of a write that an audit should show: who tried to change what, and was told no. */
const AUDITED_REFUSALS = new Set([403, 404, 409])

async function auditRefusal (journal: Pick<AdminJournal, 'audit'>, action: string, target: string, facts: AdminRequestFacts, caller: AdminCaller | null, e: unknown, log: Logger): Promise<void> {
  const status = toThreatfeedError(e).status
  if (!AUDITED_REFUSALS.has(status)) return
  const who = caller === null ? refusedKeyOf(e) : { keyId: caller.key.id, workspaceId: caller.workspace.id }
  if (who === null) return // no live key: nobody to name (401s are the login limiter's)
  try {
    await journal.audit({ keyId: who.keyId, address: facts.address, action, target, workspaceId: who.workspaceId, status })
  } catch (err) {
    log.warn({ err, action, status }, 'the audit line of a refused admin write was not written')
  }
}

/** A path segment as sent; one that is not valid percent-encoding stays as is (and matches nothing). */
function decodeParameter (raw: string): string {
  try {
    return decodeURIComponent(raw)
  } catch {
    return raw
  }
}
