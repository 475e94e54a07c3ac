/**
 * Feed deltas and the answer formats ipset and json (docs/deltas.md): the feed route hands a
 * request here when its query has `since` or `format=ipset|json` (FeedQuery.delta), after the
 * variant is known. Decisions, in order:
 *
 *   full answer of the format ── If-None-Match / If-Modified-Since ──► 304
 *     no since ──► 200 full
 *     dialect_a, dialect_b, md5, 413 ──► full (X-Feed-Delta: full)
 *     since = current tag (either encoding) ──► 304
 *     since of this variant, known to the history ──► delta, unless not smaller than full ──► full
 *     unknown here ──► once: the feed caught up with another node's newer content, decided again ──► full
 *
 * A delta is never an error: a client that always sends `since` gets a full body whenever a delta
 * cannot be had. Rendered answers are kept in a cache bounded in bytes (CACHE_BYTES), keyed by
 * content (the current tag, the base tag, the names), so a fleet one version behind costs one
 * rendering per node and change.
 */
import { createHash } from 'node:crypto'
import type { FeedChanges } from '../feed/delta-history.js'
import { countPrefixes, defaultNames, renderDelta, renderFull, selectPrefixes, type DeltaFormat, type SetNames } from '../feed/render/delta-text.js'
import { gzipBytes } from '../feed/render/gzip.js'
import { CACHE_CONTROL, CONTENT_TYPES, VARY, type FeedId, type FeedSnapshot, type HeaderList, type PublishedPrefixes, type Representation, type Variant } from '../feed/snapshot-types.js'
import type { DeltaJob, DeltaResult, DeltaTask } from '../pool/protocol.js'
import type { FeedAction } from '../store/types.js'
import type { AnswerFormat, ResolvedVariant } from './feed-params.js'
import { isNotModified } from './conditional.js'
import { prepareVariant, writeBody, writeHead, writeNotModified } from './feed-write.js'
import type { Exchange } from './respond.js'

/** What the delta answers need of the history (src/feed/delta-history.ts). */
export interface DeltaSource {
  changes (workspaceId: string, feedId: FeedId, action: FeedAction, tag: string, now: number): FeedChanges | null
  recent (workspaceId: string, feedId: FeedId, action: FeedAction, behind: number, now: number): { changes: FeedChanges, tags: readonly string[] } | null
}

/** The request fields this module reads (the feed route's FeedRequest has them). */
export interface DeltaRequest {
  readonly head: boolean
  readonly workspaceId: string
  readonly feedId: FeedId
  readonly variant: ResolvedVariant | null
  readonly gzip: boolean
  readonly ifNoneMatch: string
  readonly ifModifiedSince: string
  readonly close: boolean
  readonly at: number
}

export interface DeltaQuery {
  readonly since: string | null
  readonly answer: AnswerFormat | null
  readonly table: string | null
  readonly set: string | null
}

export interface DeltaDeps {
  /** Null: this thread keeps no history (every `since` answers full, or goes `elsewhere`). */
  readonly history: DeltaSource | null
  /** On a thread without history: hands a request that needs one to the thread that has it. */
  readonly elsewhere?: (() => void | Promise<void>) | null
  /** Counts a delta rendered while a request waited (one not rendered ahead by prerenderDeltas). */
  readonly rendered: () => void
  /** Counts the answer for the consumer (status, the tag of a 200 or 304). */
  readonly polled: (status: number, etag: string | null, lastModified: number) => void
  /** Counts body bytes sent. */
  readonly sent: (gzip: boolean, n: number) => void
}

/** Bytes of rendered answers kept (deltas, full ipset and json bodies, both encodings). */
export const CACHE_BYTES = 64 * 1024 * 1024

class AnswerCache {
  readonly #entries = new Map<string, Variant>()
  #bytes = 0

  /** Oldest first out: the entries a fleet polls are renewed by every build (prerenderDeltas), so a hit need not reorder. */
  peek (key: string): Variant | undefined {
    return this.#entries.get(key)
  }

  get (key: string, make: () => Variant): Variant {
    return this.#entries.get(key) ?? this.put(key, make())
  }

  put (key: string, v: Variant): Variant {
    const old = this.#entries.get(key)
    if (old !== undefined) {
      this.#entries.delete(key)
      this.#bytes -= old.identity.body.byteLength + old.gzip.body.byteLength
    }
    const size = v.identity.body.byteLength + v.gzip.body.byteLength
    this.#entries.set(key, v)
    this.#bytes += size
    for (const [k, old] of this.#entries) {
      if (this.#bytes <= CACHE_BYTES || this.#entries.size === 1) break
      this.#entries.delete(k)
      this.#bytes -= old.identity.body.byteLength + old.gzip.body.byteLength
    }
    return v
  }
}

const cache = new AnswerCache()
/** Delta keys whose delta is not smaller than the full feed (answered full): a poll of one skips composing it again. */
const notSmaller = new Set<string>()
const NOT_SMALLER_KEPT = 4096
const markedFull = new WeakMap<Variant, Variant>()

function unquote (etag: string): string {
  return etag.length >= 2 && etag.charCodeAt(0) === 0x22 ? etag.slice(1, -1) : etag
}

function digestHeader (body: Uint8Array): string {
  return `sha-256=:${createHash('sha256').update(body).digest('base64')}:`
}

function contentDigestOf (rep: Representation): string {
  for (const [name, value] of rep.headers) if (name === 'Content-Digest') return value
  return digestHeader(rep.body)
}

/** A representation whose body is in hand. */
function rep (body: Uint8Array, etag: string, headers: HeaderList, lastModifiedHttp: string): Representation {
  return { body, etag, headers, notModifiedHeaders: [['ETag', etag], ['Last-Modified', lastModifiedHttp], ['Cache-Control', CACHE_CONTROL], ['Vary', VARY]] }
}

/** The same answer as `v` with `X-Feed-Delta: full` (bodies shared, not copied). */
function asFull (v: Variant): Variant {
  let marked = markedFull.get(v)
  if (marked === undefined) {
    const mark = (r: Representation): Representation => ({
      get body () { return r.body },
      etag: r.etag,
      headers: [...r.headers, ['X-Feed-Delta', 'full']],
      notModifiedHeaders: r.notModifiedHeaders,
      length: r.length ?? r.body.byteLength,
      ...(r.whenBody !== undefined ? { whenBody: r.whenBody } : {}),
    })
    marked = { ...v, identity: mark(v.identity), gzip: mark(v.gzip) }
    markedFull.set(v, marked)
  }
  return marked
}

function deltaKey (full: Variant, since: string, names: SetNames): string {
  return `delta|${full.identity.etag}|${since}|${names.table}|${names.set}`
}

/** A delta answer: the new version's validators, the base, the counts, the digest of the result. */
function deltaVariant (full: Variant, format: DeltaFormat, since: string, removed: PublishedPrefixes, added: PublishedPrefixes, body: Uint8Array, gz: Uint8Array): Variant {
  const lm = full.lastModifiedHttp
  const common: HeaderList = [
    ['Content-Type', format === 'json' ? CONTENT_TYPES.json : CONTENT_TYPES.text],
    ['Cache-Control', CACHE_CONTROL],
    ['Vary', VARY],
    ['X-Feed-Delta', 'delta'],
    ['X-Feed-Delta-Base', `"${since}"`],
    ['X-Feed-Delta-Removed', String(countPrefixes(removed))],
    ['X-Feed-Delta-Added', String(countPrefixes(added))],
    ['X-Feed-Entry-Count', String(full.entries)],
    ['X-Feed-Entry-Limit', String(full.limit)],
    ['X-Feed-Result-Digest', contentDigestOf(full.identity)],
    ['Last-Modified', lm],
  ]
  return {
    ...full,
    contentType: common[0]![1],
    identity: rep(body, full.identity.etag, [...common, ['ETag', full.identity.etag], ['Content-Digest', digestHeader(body)]], lm),
    gzip: rep(gz, full.gzip.etag, [...common, ['ETag', full.gzip.etag], ['Content-Digest', digestHeader(gz)], ['Content-Encoding', 'gzip']], lm),
  }
}

/** How many versions behind the current one deltas are rendered ahead, per build: the bases most of a fleet polls from. */
export const PRERENDERED_BEHIND = [1, 2] as const

/**
 * Renders, in the pool and once per build, the deltas one and two versions behind of every plain
 * and nftables variant of a new snapshot (default names, both encodings), into the cache the
 * requests read: a fleet polling after a change then costs a lookup per poll. Deltas not smaller
 * than the full feed are left to the request, which answers full.
 */
export async function prerenderDeltas (snapshot: FeedSnapshot, history: DeltaSource, render: (task: DeltaTask) => Promise<DeltaResult>, now: number): Promise<number> {
  const jobs: DeltaJob[] = []
  const targets: Array<{ full: Variant, format: DeltaFormat, tags: string[], removed: PublishedPrefixes, added: PublishedPrefixes, names: SetNames }> = []
  const recent = new Map<string, ReturnType<DeltaSource['recent']>>()
  for (const [key, full] of snapshot.variants) {
    const [format, family, action, checksum, shard] = key.split('|') as [string, 'v4' | 'v6' | 'both', FeedAction, string, string | undefined]
    if ((format !== 'plain' && format !== 'nftables') || checksum !== '' || full.status !== 200) continue
    const mine = splitTag(unquote(full.identity.etag))
    if (mine === null) continue
    const [index, of] = shard === undefined ? [0, 0] : shard.split('/').map(Number) as [number, number]
    for (const behind of PRERENDERED_BEHIND) {
      const k = `${action}|${behind}`
      if (!recent.has(k)) recent.set(k, history.recent(snapshot.workspaceId, snapshot.feedId, action, behind, now))
      const base = recent.get(k)
      if (base === null || base === undefined) continue
      const tags = base.tags.filter((t) => { const p = splitTag(t); return p !== null && p[0] === mine[0] && p[1] === mine[1] })
      if (tags.length === 0) continue
      const removed = selectPrefixes(base.changes.removed, family, shard === undefined ? null : { index, of })
      const added = selectPrefixes(base.changes.added, family, shard === undefined ? null : { index, of })
      if (countPrefixes(removed) + countPrefixes(added) >= full.entries) continue
      const names = defaultNames(format, family)
      jobs.push({ format, removed, added, names })
      targets.push({ full, format, tags, removed, added, names })
    }
  }
  if (jobs.length === 0) return 0
  const { bodies } = await render({ jobs })
  targets.forEach((t, i) => {
    const { identity, gzip } = bodies[i]!
    for (const since of t.tags) cache.put(deltaKey(t.full, since, t.names), deltaVariant(t.full, t.format, since, t.removed, t.added, identity, gzip))
  })
  return jobs.length
}

/** `plain.v4.block.s1of8.identity.DIGEST` → `['plain', 'v4.block.s1of8', 'identity', 'DIGEST']`; null when not of that shape. */
function splitTag (tag: string): [string, string, string, string] | null {
  const first = tag.indexOf('.')
  const last = tag.lastIndexOf('.')
  const encodingAt = tag.lastIndexOf('.', last - 1)
  if (first < 1 || encodingAt <= first) return null
  return [tag.slice(0, first), tag.slice(first + 1, encodingAt), tag.slice(encodingAt + 1, last), tag.slice(last + 1)]
}

/** The full answer of an answer format: the plain variant's networks, rendered here, tagged from the plain tags. */
function answerFull (snapshot: FeedSnapshot, plain: Variant, r: DeltaRequest, format: AnswerFormat, names: SetNames): Variant {
  const params = r.variant!.params
  const key = `full|${plain.identity.etag}|${format}|${names.set}`
  return cache.get(key, () => {
    const set = selectPrefixes(snapshot.published[params.action].total, params.family, params.shard)
    const body = renderFull(format, set, params.family, names, snapshot.limit)
    const gz = gzipBytes(body)
    const tagOf = (etag: string): string => `"${format}${unquote(etag).slice(unquote(etag).indexOf('.'))}"`
    const common: HeaderList = [
      ['Content-Type', format === 'json' ? CONTENT_TYPES.json : CONTENT_TYPES.text],
      ['Cache-Control', CACHE_CONTROL],
      ['Vary', VARY],
      ['X-Feed-Entry-Count', String(plain.entries)],
      ['X-Feed-Entry-Limit', String(plain.limit)],
    ]
    const idTag = tagOf(plain.identity.etag)
    const gzTag = tagOf(plain.gzip.etag)
    const lm = plain.lastModifiedHttp
    return {
      ...plain,
      contentType: common[0]![1],
      identity: rep(body, idTag, [...common, ['ETag', idTag], ['Last-Modified', lm], ['Content-Digest', digestHeader(body)]], lm),
      gzip: rep(gz, gzTag, [...common, ['ETag', gzTag], ['Last-Modified', lm], ['Content-Digest', digestHeader(gz)], ['Content-Encoding', 'gzip']], lm),
    }
  })
}

function write (ex: Exchange, r: DeltaRequest, v: Variant, deps: DeltaDeps): void | Promise<void> {
  const prepared = prepareVariant(v)[r.gzip ? 'gzip' : 'identity']
  deps.polled(prepared.status, prepared.status === 200 ? prepared.etag : null, v.lastModified)
  if (r.head) {
    writeHead(ex, prepared, r.close)
    return
  }
  deps.sent(r.gzip, prepared.length)
  return writeBody(ex, prepared, r.close)
}

function notModified (ex: Exchange, r: DeltaRequest, v: Variant, deps: DeltaDeps): void {
  const prepared = prepareVariant(v)[r.gzip ? 'gzip' : 'identity']
  writeNotModified(ex, prepared.notModified!, r.close)
  deps.polled(304, prepared.etag, v.lastModified)
}

/**
 * Answers a feed request whose query asks for a delta or an answer format. `fresher` (once per
 * request) waits for this node to catch up with content another node published first and
 * answers again; null when that was done.
 */
export function answerDelta (ex: Exchange, r: DeltaRequest, q: DeltaQuery, snapshot: FeedSnapshot, variant: Variant, deps: DeltaDeps, fresher: (() => Promise<void>) | null): void | Promise<void> {
  const params = r.variant!.params
  const format: DeltaFormat | null = q.answer ?? (params.format === 'plain' || params.format === 'nftables' ? params.format : null)
  const names: SetNames = { ...defaultNames(format ?? 'plain', params.family), ...(q.table !== null ? { table: q.table } : {}), ...(q.set !== null ? { set: q.set } : {}) }
  // Answer formats render on the thread with the cache (its bound is per process).
  if (q.answer !== null && deps.history === null && deps.elsewhere != null) return deps.elsewhere()
  const full = variant.status === 200 && q.answer !== null ? answerFull(snapshot, variant, r, q.answer, names) : variant
  const chosen = r.gzip ? full.gzip : full.identity
  if (full.status === 200 && isNotModified(r.ifNoneMatch, r.ifModifiedSince, chosen.etag, full.lastModifiedHttp, full.lastModified)) return notModified(ex, r, full, deps)
  if (q.since === null || full.status !== 200) return write(ex, r, full, deps)
  const since = q.since
  if (since === unquote(full.identity.etag) || since === unquote(full.gzip.etag)) return notModified(ex, r, full, deps)
  // A front-end thread answers the 304s above; a body it leaves to the main thread (a replica's
  // bodies come on first use, which asFull's copy does not wait for).
  if (deps.history === null && deps.elsewhere != null) return deps.elsewhere()
  if (format === null || params.checksum) return write(ex, r, asFull(full), deps)

  // A delta answered before (or rendered ahead by the build) is a lookup: no history, no rendering.
  const key = deltaKey(full, since, names)
  const hit = cache.peek(key)
  if (hit !== undefined) return write(ex, r, hit, deps)
  if (notSmaller.has(key)) return write(ex, r, asFull(full), deps)

  // The base must be a tag of this variant (either encoding); the history knows it by its plain or nftables tag.
  const mine = splitTag(unquote(full.identity.etag))
  const theirs = splitTag(since)
  const changes = mine !== null && theirs !== null && theirs[0] === mine[0] && theirs[1] === mine[1] && (theirs[2] === 'identity' || theirs[2] === 'gzip') && deps.history !== null
    ? deps.history.changes(r.workspaceId, r.feedId, params.action, `${q.answer === null ? theirs[0] : 'plain'}.${theirs[1]}.${theirs[2]}.${theirs[3]}`, r.at)
    : null
  if (changes === null) return fresher === null ? write(ex, r, asFull(full), deps) : fresher()

  const removed = selectPrefixes(changes.removed, params.family, params.shard)
  const added = selectPrefixes(changes.added, params.family, params.shard)
  const count = countPrefixes(removed) + countPrefixes(added)
  if (count >= full.entries) {
    if (notSmaller.size >= NOT_SMALLER_KEPT) notSmaller.clear()
    notSmaller.add(key)
    return write(ex, r, asFull(full), deps)
  }
  const delta = cache.get(key, () => {
    deps.rendered()
    const body = renderDelta(format, removed, added, names)
    return deltaVariant(full, format, since, removed, added, body, gzipBytes(body))
  })
  return write(ex, r, delta, deps)
}
