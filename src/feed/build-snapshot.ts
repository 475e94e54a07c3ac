/**
 * One feed's rules → one FeedSnapshot. The same path serves the server (tasks run in the pool)
 * and `threatfeed feed get` (tasks run in-process), so an operator sees exactly what an appliance
 * receives.
 *
 *   select rules (labels) ─► compute task ─► Last-Modified per (family, action) ─► 6 render tasks ─► assemble
 *       main thread           worker           store (feedVersions.observe)         workers          main thread
 *
 * The main thread does the O(rules) selection and the O(variants) assembly; everything O(networks)
 * — expansion, coalescing, carving, rendering, MD5, gzip — runs in tasks, and their results come
 * back as shared or transferred buffers that the snapshot's bodies view without copying.
 *
 * A rebuild is incremental where it can be, always by content: each render task gets the feed's
 * previous text and compressed chunks (BuildResult.caches, in shared memory, so sending them costs
 * nothing) and writes and compresses only the chunks whose networks changed; a feed's first build
 * starts from the latest build of any feed. The main thread then keeps one copy of every text,
 * chunk and assembled body however many snapshots hold it (shared-content.ts). Measured on the
 * 131,072-entry feed of bench/snapshot.ts, one added IP: 170–270 ms became 80–135 ms, depending
 * on the load of the machine.
 */
import type { AccessList, FeedAction, FeedKey } from '../store/types.js'
import { FEED_ACTIONS } from '../store/types.js'
import { ThreatfeedError } from '../errors.js'
import { SOURCE_CHUNK, type ActionNetworks, type ChunkCache, type ComputeResult, type ComputeTask, type RenderResult, type RenderTask, type RenderedRepresentation, type WireFamily, type WireStream } from '../pool/protocol.js'
import { GZIP_LEVEL } from './render/gzip.js'
import { allTargeting, grouping, lapsing, selecting, type RuleTable } from './rule-table.js'
import { runWhole } from './slices.js'
import type { LapseTargets, TargetGroup } from '../pool/protocol.js'
import type { LastModifiedKeeper } from './last-modified.js'
import { sharedContent } from './shared-content.js'
import {
  CACHE_CONTROL, CONTENT_TYPES, DEFAULT_ENTRY_LIMIT, VARY, variantKey,
  type FeedId, type FeedSnapshot, type HeaderList, type PublishedNetworks, type Representation, type ShardRef, type Variant,
} from './snapshot-types.js'
import { MAX_SHARDS } from './render/shard-networks.js'

/** What runs the O(networks) work: the pool (src/pool/pool.ts) or in-process (in-process-tasks.ts). */
export interface FeedTasks {
  compute (task: Omit<ComputeTask, 'geo'>): Promise<ComputeResult>
  render (task: RenderTask): Promise<RenderResult>
}

export interface FeedDefinition {
  workspaceId: string
  workspaceName: string
  /** The list this feed publishes; null for the workspace feed. */
  list: AccessList | null
}

export interface BuildOptions {
  tasks: FeedTasks
  lastModified: LastModifiedKeeper
  /** Last-Modified of a new content, and the snapshot's builtAt. */
  now: number
  /**
   * Rules lapsing at or before this instant are left out (default `now`); the snapshot expires at
   * the first lapse after it. FeedService cuts ahead of the build's end (rebuild-schedule.ts).
   * Used only when `buildSnapshot` is given the rules, not targets taken beforehand.
   */
  cutoff?: number
  /** Text and compressed chunks of this feed's previous build, by `${action}|${stream}` (BuildResult.caches). */
  caches?: ReadonlyMap<string, ChunkCache>
  /**
   * Without `caches`, start from the latest build of any feed (default true; reuse is by content,
   * so that is always safe). False builds from nothing, as after a restart: a cold build.
   */
  reuseOtherFeeds?: boolean
  gzipLevel?: number
  /** Shard counts N to build besides the list's stored one (those requested lately: FeedService). */
  shards?: readonly number[]
  /**
   * The IANA special-purpose space: 'drop' leaves it out (`--reject-special --guard-mode drop`),
   * 'detect' only counts it (guards.ts), so the compute task is the one the guard sent: a worker
   * that computed it answers from memory.
   */
  special?: 'detect' | 'drop'
}

export interface BuildResult {
  snapshot: FeedSnapshot
  caches: Map<string, ChunkCache>
  /** Targets that could not be read (corrupt rules), left out. */
  invalid: number
}

const STREAMS: readonly WireStream[] = ['lines', 'rows', 'nft']
const FAMILIES: readonly WireFamily[] = ['v4', 'v6', 'both']
const WORKSPACE_DESCRIPTION = 'All access rules'

/**
 * The caches of the latest build of any feed, by `${action}|${stream}`: a feed's first build
 * starts from them. Weak: the feed that built them keeps them (FeedService holds its caches).
 */
const latestCaches = new Map<string, WeakRef<ChunkCache>>()

/** What a feed's bodies show besides networks (dialect_a's name and description): the compute task's `meta`. */
export function metaOf (def: FeedDefinition): string {
  return `${def.list?.name ?? def.workspaceName}\n${def.list === null ? WORKSPACE_DESCRIPTION : def.list.description}`
}

export function feedIdOf (def: FeedDefinition): FeedId {
  return def.list?.id ?? '*'
}

function httpDate (ms: number): string {
  return new Date(ms).toUTCString()
}

const EMPTY = new Uint8Array(0)

/**
 * A representation whose body is spans of the build's bytes (the shared text, the feed's local
 * bytes, compressed chunks): a single span is a view, several are copied together on first use
 * (a memcpy of at most a few MB, once — and only for the bodies clients ask for), and that copy is
 * shared with every snapshot that has the same body (sharedContent).
 */
class SpanRepresentation implements Representation {
  readonly etag: string
  readonly headers: HeaderList
  readonly notModifiedHeaders: HeaderList
  readonly #sources: readonly Uint8Array[]
  readonly #spans: readonly number[]
  readonly #length: number
  readonly #key: string | null
  #body: Uint8Array | null

  constructor (sources: readonly Uint8Array[], r: RenderedRepresentation, headers: HeaderList, notModifiedHeaders: HeaderList) {
    this.etag = r.etag
    this.headers = headers
    this.notModifiedHeaders = notModifiedHeaders
    this.#sources = sources
    this.#spans = r.spans
    this.#length = r.length
    this.#key = r.key
    this.#body = r.spans.length === 0 ? EMPTY : r.spans.length === 3 ? viewOf(sources, r.spans, 0) : null
  }

  /** The body's length, without assembling it (a 304, a HEAD, or a client of the other encoding). */
  get length (): number {
    return this.#length
  }

  get body (): Uint8Array {
    if (this.#body === null) {
      this.#body = this.#key === null ? this.#assemble() : sharedContent.intern(`b:${this.#key}`, () => this.#assemble())
    }
    return this.#body
  }

  #assemble (): Uint8Array {
    // Shared memory: front-end threads send this body as a view, not a copy (snapshot-port.ts).
    const out = new Uint8Array(new SharedArrayBuffer(this.#length))
    let o = 0
    for (let k = 0; k < this.#spans.length; k += 3) {
      const part = viewOf(this.#sources, this.#spans, k)
      out.set(part, o)
      o += part.length
    }
    return out
  }
}

/** The bytes of the span at spans[k..k+3): sources are [text, local, ...chunks]. */
function viewOf (sources: readonly Uint8Array[], spans: readonly number[], k: number): Uint8Array {
  const source = spans[k]!
  if (source === SOURCE_CHUNK) return sources[FIRST_CHUNK + spans[k + 1]!]!
  return sources[source]!.subarray(spans[k + 1]!, spans[k + 1]! + spans[k + 2]!)
}

const FIRST_CHUNK = 2

function representation (sources: readonly Uint8Array[], r: RenderedRepresentation, common: HeaderList, gzip: boolean, validators: boolean, lastModifiedHttp: string): Representation {
  const headers: Array<readonly [string, string]> = [...common]
  // RFC 9530 §2: the digest of the content as sent, so a gzip answer carries that of the gzip bytes.
  if (validators) headers.push(['ETag', r.etag], ['Last-Modified', lastModifiedHttp], ['Content-Digest', `sha-256=:${r.sha256}:`])
  if (gzip) headers.push(['Content-Encoding', 'gzip'])
  const notModified: HeaderList = validators ? [['ETag', r.etag], ['Last-Modified', lastModifiedHttp], ['Cache-Control', CACHE_CONTROL], ['Vary', VARY]] : []
  return new SpanRepresentation(sources, r, headers, notModified)
}

/** A copy of some bytes in shared memory (what a render task can be sent without a copy). */
function toShared (bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(new SharedArrayBuffer(bytes.length))
  out.set(bytes)
  return out
}

/**
 * The compressed chunks of a render result, as held objects: the feed's previous ones (which the
 * task reused) and the fresh ones, each copied out of the moved buffer into shared memory of its
 * own — so no chunk keeps a whole build's buffer alive, and the next build's task gets them
 * without a copy — unless another feed already holds the same.
 */
function resolveChunks (r: RenderResult, previous: ChunkCache | null): Uint8Array[] {
  const fresh = new Map(r.fresh.keys.map((k, i) => [k, i]))
  const held = new Map<string, Uint8Array>()
  if (previous !== null) previous.keys.forEach((k, i) => held.set(k, previous.chunks[i]!))
  const { offsets, bytes } = r.fresh
  return r.chunkKeys.map((key) => {
    const i = fresh.get(key)
    if (i !== undefined) return sharedContent.intern(`z:${key}`, () => toShared(bytes.subarray(offsets[i]!, offsets[i + 1]!)))
    const chunk = held.get(key)
    if (chunk === undefined) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error(`render result names chunk ${key}, neither fresh nor cached`) })
    return chunk
  })
}

function assemble (action: FeedAction, shard: ShardRef | null, result: RenderResult, previous: ChunkCache | null, since: Readonly<Record<WireFamily, number>>, limit: number, into: Map<string, Variant>): ChunkCache {
  const text = sharedContent.intern(`t:${result.textKey}`, () => new Uint8Array(result.text))
  const chunks = resolveChunks(result, previous)
  const sources = [text, new Uint8Array(result.local), ...chunks]
  for (const v of result.variants) {
    const lastModified = Math.floor(since[v.family] / 1000) * 1000
    const lastModifiedHttp = httpDate(lastModified)
    const ok = v.status === 200
    const contentType = !ok ? CONTENT_TYPES.json : v.format === 'dialect_b' && !v.checksum ? CONTENT_TYPES.csv : CONTENT_TYPES.text
    const common: HeaderList = [
      ['Content-Type', contentType],
      ['Cache-Control', CACHE_CONTROL],
      ['Vary', VARY],
      ['X-Feed-Entry-Count', String(v.entries)],
      ['X-Feed-Entry-Limit', String(limit)],
    ]
    into.set(variantKey({ format: v.format, family: v.family, action, checksum: v.checksum, shard }), {
      status: v.status,
      contentType,
      identity: representation(sources, v.identity, common, false, ok, lastModifiedHttp),
      gzip: representation(sources, v.gzip, common, true, ok, lastModifiedHttp),
      entries: v.entries,
      limit,
      lastModified,
      lastModifiedHttp,
    })
  }
  return { keys: result.chunkKeys, chunks, text: { key: result.textKey, bytes: text, pieces: result.textPieces } }
}

/**
 * What one set of render tasks publishes: the whole feed, or one shard of it. A shard has its own
 * feed-version records (Last-Modified), under the list id followed by `#I/N`, and its own caches.
 */
interface Unit {
  readonly shard: ShardRef | null
  readonly versionId: string
  readonly cacheSuffix: string
  readonly networks: Record<FeedAction, ActionNetworks>
}

interface Job { u: number, unit: Unit, action: FeedAction, stream: WireStream, key: string }

/** The list's stored shard count and the extra ones, each once, in order; N = 1 is a shard set of one. */
export function shardCountsOf (list: AccessList | null, extra: readonly number[] | undefined): number[] {
  const all = new Set<number>()
  if (list?.defaults.shards !== undefined) all.add(list.defaults.shards)
  for (const n of extra ?? []) all.add(n)
  return [...all].filter((n) => Number.isInteger(n) && n >= 1 && n <= MAX_SHARDS).sort((a, b) => a - b)
}

function unitsOf (listId: FeedId, networks: ComputeResult, shardCounts: readonly number[]): Unit[] {
  // Render tasks get the networks without their shards: the shard arrays have tasks of their own.
  const whole = (n: ActionNetworks): ActionNetworks => ({ total: n.total, groups: n.groups, hash: n.hash })
  const units: Unit[] = [{ shard: null, versionId: listId, cacheSuffix: '', networks: { block: whole(networks.block), allow: whole(networks.allow) } }]
  for (const of of shardCounts) {
    const block = networks.block.shards?.find((s) => s.of === of)
    const allow = networks.allow.shards?.find((s) => s.of === of)
    if (block === undefined || allow === undefined) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error(`compute result lacks the shards of ${of}`) })
    for (let index = 1; index <= of; index++) {
      units.push({
        shard: { index, of },
        versionId: `${listId}#${index}/${of}`,
        cacheSuffix: `|${index}/${of}`,
        networks: { block: block.parts[index - 1]!, allow: allow.parts[index - 1]! },
      })
    }
  }
  return units
}

function countOf (n: ActionNetworks): { v4: number, v6: number } {
  return { v4: n.total.v4.length / 2, v6: n.total.v6.length / 5 }
}

/** The explain index of one action: the computed arrays themselves (no copy, no hash). */
function publishedOf (n: ActionNetworks): PublishedNetworks {
  return n.lapse === undefined ? { total: n.total, groups: n.groups } : { total: n.total, groups: n.groups, lapse: n.lapse }
}

/** What a feed takes from its workspace's rules at one instant: its targets, grouped. */
export interface FeedTargets {
  readonly block: TargetGroup[]
  readonly allow: TargetGroup[]
  readonly carve: TargetGroup
  /** Earliest expiry among them: the snapshot's expiresAt. */
  readonly expiresAt: number
  /** The selected rules' targets with their expiries, for each published network's lapse; absent: not computed. */
  readonly lapses?: { readonly block: LapseTargets, readonly allow: LapseTargets }
}

/** A feed's targets as a sliceable loop (slices.ts): O(rules), on the calling thread; rules lapsed at `cutoff` are left out. */
export function * feedTargets (rules: RuleTable, list: AccessList | null, cutoff: number): Generator<void, FeedTargets> {
  const defaults = list?.defaults ?? null
  const selection = yield * selecting(rules, list, cutoff)
  return {
    block: yield * grouping(rules, selection.block, defaults),
    allow: yield * grouping(rules, selection.allow, defaults),
    carve: yield * allTargeting(rules, selection.carve),
    expiresAt: selection.expiresAt,
    lapses: { block: yield * lapsing(rules, selection.block), allow: yield * lapsing(rules, selection.allow) },
  }
}

/**
 * Builds every variant of one feed, from the workspace's rules or from the feed's targets taken
 * from them beforehand (the server does that in slices: feedTargets).
 *
 * @example
 *   const { snapshot } = await buildSnapshot({ workspaceId, workspaceName: 'acme', list: null }, toRuleTable(rules),
 *     { tasks: inProcessTasks(geo), lastModified: new LastModifiedKeeper(store.feedVersions, { timeoutMs: 2000 }), now: Date.now() })
 *   snapshot.variants.get('plain|v4|block|')?.identity.body
 */
export async function buildSnapshot (def: FeedDefinition, rules: RuleTable | FeedTargets, opts: BuildOptions): Promise<BuildResult> {
  const { list, workspaceId } = def
  const now = opts.now
  const defaults = list?.defaults ?? null
  const selection = 'carve' in rules ? rules : runWhole(feedTargets(rules, list, opts.cutoff ?? now))
  const name = list?.name ?? def.workspaceName
  const description = list === null ? WORKSPACE_DESCRIPTION : list.description
  const limit = list?.defaults.maxEntries ?? DEFAULT_ENTRY_LIMIT
  const listId = feedIdOf(def)

  const shardCounts = shardCountsOf(list, opts.shards)
  const networks = await opts.tasks.compute({
    block: selection.block,
    allow: selection.allow,
    carve: selection.carve,
    meta: metaOf(def),
    ...(shardCounts.length > 0 ? { shards: [...shardCounts] } : {}),
    ...(opts.special !== undefined ? { special: opts.special } : {}),
    ...(selection.lapses !== undefined ? { lapses: { block: selection.lapses.block, allow: selection.lapses.allow } } : {}),
  })
  const units = unitsOf(listId, networks, shardCounts)

  // Last-Modified comes from the store, but only dialect_a's header needs it to render: rendering
  // starts at once with the time the keeper predicts, and the store's answer arrives meanwhile.
  // When it differs (another node saw the content first, or this process just started), the
  // lines stream of that action is rendered again with the store's time.
  const perFamily = (f: (family: WireFamily) => number): Record<WireFamily, number> => ({ v4: f('v4'), v6: f('v6'), both: f('both') })
  const keyOf = (unit: Unit, action: FeedAction, family: WireFamily): FeedKey => ({ workspaceId, listId: unit.versionId, family, action })
  const predicted = units.map((unit) => ({
    block: perFamily((family) => opts.lastModified.predict(keyOf(unit, 'block', family), unit.networks.block.hash[family], now)),
    allow: perFamily((family) => opts.lastModified.predict(keyOf(unit, 'allow', family), unit.networks.allow.hash[family], now)),
  }))
  const observed = Promise.all(units.flatMap((unit, u) => FEED_ACTIONS.flatMap((action) => FAMILIES.map(async (family) => {
    const v = await opts.lastModified.observe(keyOf(unit, action, family), unit.networks[action].hash[family], now)
    return { u, action, family, since: v.since }
  }))))

  const level = opts.gzipLevel ?? GZIP_LEVEL
  const jobs = units.flatMap((unit, u) => FEED_ACTIONS.flatMap((action) => STREAMS.map((stream) => ({ u, unit, action, stream, key: `${action}|${stream}${unit.cacheSuffix}` }))))
  // What each task may reuse: the feed's previous build, or for a first build the latest build of
  // any feed (lists of a workspace mostly select the same networks). Only a hint: chunks are
  // reused by content key, and everything in it is shared memory, so a useless one costs nothing.
  const reuse = new Map(jobs.map(({ unit, key }) => {
    const latest = unit.shard === null && opts.reuseOtherFeeds !== false ? latestCaches.get(key)?.deref() ?? null : null
    return [key, opts.caches?.get(key) ?? latest]
  }))
  const render = (job: Job, generated: Record<WireFamily, number>): Promise<RenderResult> => opts.tasks.render({
    stream: job.stream,
    action: job.action,
    networks: job.unit.networks[job.action],
    name,
    description,
    generated,
    limit,
    listFeed: list !== null,
    gzipLevel: level,
    cache: reuse.get(job.key)!,
    shard: job.unit.shard,
  })
  const [versions, results] = await Promise.all([observed, Promise.all(jobs.map((job) => render(job, predicted[job.u]![job.action])))])
  const since = predicted.map((p) => ({ block: { ...p.block }, allow: { ...p.allow } }))
  for (const v of versions) since[v.u]![v.action][v.family] = v.since
  await Promise.all(jobs.map(async (job, i) => {
    if (job.stream !== 'lines') return
    const p = predicted[job.u]![job.action]
    const s = since[job.u]![job.action]
    // dialect_a prints whole seconds: a guess off by less than that renders the same bytes.
    if (FAMILIES.every((f) => Math.floor(s[f] / 1000) === Math.floor(p[f] / 1000))) return
    results[i] = await render(job, s)
  }))

  const variants = new Map<string, Variant>()
  const caches = new Map<string, ChunkCache>()
  jobs.forEach((job, i) => {
    const cache = assemble(job.action, job.unit.shard, results[i]!, reuse.get(job.key)!, since[job.u]![job.action], limit, variants)
    caches.set(job.key, cache)
    if (job.unit.shard === null) latestCaches.set(job.key, new WeakRef(cache))
  })

  const snapshot: FeedSnapshot = {
    workspaceId,
    feedId: listId,
    name,
    defaults,
    limit,
    builtAt: now,
    expiresAt: selection.expiresAt,
    shardCounts,
    networks: { block: countOf(networks.block), allow: countOf(networks.allow) },
    variants,
    published: { block: publishedOf(networks.block), allow: publishedOf(networks.allow) },
  }
  return { snapshot, caches, invalid: networks.invalid }
}
