/**
 * The published form of a feed: what the uWebSockets.js thread answers from. Built off-thread by
 * the pool (workers/), swapped in whole, never mutated.
 *
 *   FeedService (per workspace)                       FeedSnapshot (one feed = workspace feed or one list)
 *   ┌──────────────────────────┐   feedId            ┌──────────────────────────────────────────┐
 *   │ Map<feedId, FeedSnapshot>├────────────────────►│ expiresAt: earliest rule expiry          │
 *   └──────────────────────────┘                     │ defaults, limit, name                    │
 *                                                    │ variants: Map<variantKey, Variant>       │
 *                                                    └──────────────┬───────────────────────────┘
 *                                       "plain|v4|block|"           │
 *                                                    ┌──────────────▼───────────────────────────┐
 *                                                    │ identity { body, etag, headers, … }      │
 *                                                    │ gzip     { body, etag, headers, … }      │
 *                                                    │ status, entries, limit, lastModified     │
 *                                                    └──────────────────────────────────────────┘
 *
 * A swap replaces a FeedSnapshot reference in one assignment, so a request sees either the old or
 * the new snapshot, never a mix.
 *
 * Eager or lazy, decided by measurement (bench/snapshot.ts, a 131,072-entry feed): every variant's
 * work is eager — rendering, MD5, gzip (reusing compressed chunks), ETags, entry counts, headers —
 * so a lookup is synchronous, `snapshot.variants.get(variantKey(params))`, and a 304 never waits.
 * What is lazy is only where bytes sit: a body that is one contiguous span of the build's buffers
 * (plain, dialect_b, nftables, checksums) is a view; a body of several spans (gzip: compressed
 * chunks between a header and a trailer; dialect_a: its header, then the shared lines) is copied
 * together on first read of `body`, kept, and shared with every snapshot that has the same body.
 * The buffers themselves are shared between snapshots by content (shared-content.ts): a stream's
 * text depends on the networks alone, so ten lists selecting the workspace's 131,072 networks
 * hold one 9 MB copy of it, not ten. Measured with those ten lists and the workspace feed: 135 MB
 * of snapshot buffers became 13 MB, and the process's RSS 1 s after the builds went from ~415 to
 * ~337 MiB, 10 s later from ~390 to ~261 MiB (of which ~130 MiB are node, the LMDB map and the
 * geo index, before any feed). The key set is fixed: 4 formats × 3
 * families × 2 actions × checksum, except nftables with family `both`, which is not a variant
 * (an nftables set holds one family: the HTTP side answers 400 with details.supported
 * ["v4","v6"]), so `get` returns undefined for it.
 *
 * How to answer a request from a Variant `v` and its chosen representation `r`
 * (`v.gzip` when the client accepts gzip, else `v.identity`):
 * - `v.status` 200: write `r.headers` (Content-Type, ETag, Last-Modified, Cache-Control, Vary,
 *   X-Feed-Entry-Count, X-Feed-Entry-Limit, Content-Digest and, for gzip, Content-Encoding) and `r.body`;
 *   a conditional hit answers 304 with `r.notModifiedHeaders` and no body.
 * - `v.status` 413: the entry cap is exceeded; `r.body` is the SPEC 2.9 error JSON
 *   (details {entries, limit, hint}), `r.headers` carry X-Feed-Entry-Count/-Limit and no
 *   validators; conditionals do not apply (`r.notModifiedHeaders` is empty).
 */
import type { FeedAction, FeedFormat, Family, ListDefaults } from '../store/types.js'

/** Feed id: '*' for the workspace feed (/v1/threat/feeds), else the list UUID. */
export type FeedId = string

export const WORKSPACE_FEED: FeedId = '*'

export interface VariantParams {
  format: FeedFormat
  family: Family
  action: FeedAction
  checksum: boolean
  /** One shard of the feed (`?shard=I&of=N`); absent or null: the whole feed. */
  shard?: ShardRef | null
}

/** Shard `index` (1-based) of `of` (README "Shards"). */
export interface ShardRef {
  readonly index: number
  readonly of: number
}

/**
 * `${format}|${family}|${action}|${checksum ? 'md5' : ''}`, then `|${I}/${N}` for a shard: a small
 * string, built once per request.
 */
export function variantKey (p: VariantParams): string {
  const base = `${p.format}|${p.family}|${p.action}|${p.checksum ? 'md5' : ''}`
  return p.shard === undefined || p.shard === null ? base : `${base}|${p.shard.index}/${p.shard.of}`
}

export type HeaderList = ReadonlyArray<readonly [string, string]>

/** One encoded representation of a variant, ready to write. */
export interface Representation {
  /** The bytes to send. May be assembled on first read (a memcpy, once); read it only to send it. */
  readonly body: Uint8Array
  /** Strong entity tag with quotes, e.g. `"plain.v4.block.gzip.1f3a…"`; differs per variant and encoding. */
  readonly etag: string
  /** Every header of the response carrying this representation (Content-Length is uWS's). */
  readonly headers: HeaderList
  /** The headers of a 304 for it (ETag, Last-Modified, Cache-Control, Vary); empty for a 413. */
  readonly notModifiedHeaders: HeaderList
  /**
   * For a body that is not in hand yet (a front-end thread's, fetched from the main thread on
   * first use: feed/snapshot-port.ts): its byte length, known without reading `body`.
   */
  readonly length?: number
  /**
   * Resolves once `body` can be read without waiting; null when it can now. Absent: always can.
   * A front-end thread awaits it rather than blocking its event loop on the main thread.
   */
  readonly whenBody?: () => Promise<void> | null
}

export interface Variant {
  /** 200, or 413 when entries exceed the limit (then bodies are the SPEC 2.9 error JSON). */
  readonly status: 200 | 413
  readonly contentType: string
  readonly identity: Representation
  readonly gzip: Representation
  /** Networks (rows for dialect_b) in this variant: X-Feed-Entry-Count. */
  readonly entries: number
  /** The entry cap: X-Feed-Entry-Limit. */
  readonly limit: number
  /** Last-Modified as epoch ms (second precision) and as the HTTP-date string. */
  readonly lastModified: number
  readonly lastModifiedHttp: string
}

export interface FeedSnapshot {
  readonly workspaceId: string
  readonly feedId: FeedId
  /** dialect_a's first header line: the list name, or the workspace name for the workspace feed. */
  readonly name: string
  /** The list's stored defaults (SPEC 2.8); null for the workspace feed. */
  readonly defaults: ListDefaults | null
  /** Entry cap: the list's max_entries, else DEFAULT_ENTRY_LIMIT. */
  readonly limit: number
  readonly builtAt: number
  /** Earliest expiresAt of any rule in it (Infinity when none): the snapshot must not be served past it. */
  readonly expiresAt: number
  /** The shard counts N whose shards are variants of this snapshot (the list's default N and those asked for). */
  readonly shardCounts: readonly number[]
  /** Networks per action and family (what the plain variants count); for metrics and logs. */
  readonly networks: Readonly<Record<FeedAction, { readonly v4: number, readonly v6: number }>>
  readonly variants: ReadonlyMap<string, Variant>
  /** The networks every variant was rendered from, per action: what explain looks an address up in. */
  readonly published: Readonly<Record<FeedAction, PublishedNetworks>>
}

/** Coalesced prefixes of one set in the PackedPrefixes layout (src/net/packed.ts): v4 pairs
 *  `[addr, len]`, v6 5-tuples `[w0, w1, w2, w3, len]`, sorted by first address and disjoint. */
export interface PublishedPrefixes {
  readonly v4: Uint32Array
  readonly v6: Uint32Array
}

/**
 * The explain index of one action of a snapshot: the prefix arrays the worker computed (shared
 * memory, held not copied) and the renderers wrote every body from — plain, dialect_a and
 * nftables from `total`, dialect_b from `groups`. Sorted and disjoint within each array, so an
 * address is one binary search per array (feed/explain-lookup.ts): the index IS the feed's own
 * networks, and whatever explain says is published is, byte for byte, in the body.
 */
export interface PublishedNetworks {
  readonly total: PublishedPrefixes
  /** dialect_b's groups (each coalesced on its own; overlapping groups both show a row). */
  readonly groups: ReadonlyArray<PublishedPrefixes & { readonly confidence: string, readonly severity: string }>
  /**
   * When each prefix of `total` lapses (ms, Infinity for never; its IPv4 prefixes first): the
   * earliest, over its addresses, of the latest expiry of a rule covering the address — what a
   * CrowdSec bouncer's duration is cut to (docs/bouncers.md). Absent when not computed.
   */
  readonly lapse?: Float64Array
}

/** SPEC §8: 131072 entries unless the list's max_entries says otherwise. */
export const DEFAULT_ENTRY_LIMIT = 131072

/** SPEC 4.3 (fixed by the spec, independent of the rebuild interval). */
export const CACHE_CONTROL = 'private, max-age=30, must-revalidate'
export const VARY = 'Accept-Encoding, Authorization'

/**
 * Content types: every text body is UTF-8 (dialect_a headers may carry non-ASCII list names), so
 * the charset is always stated; checksum bodies are text/plain; a 413 body is JSON.
 */
export const CONTENT_TYPES = {
  text: 'text/plain; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  json: 'application/json',
} as const

/**
 * The variant for some parameters; undefined only for nftables with family `both`.
 *
 * @example
 *   findVariant(snapshot, { format: 'plain', family: 'v4', action: 'block', checksum: false })?.identity.body
 */
export function findVariant (snapshot: FeedSnapshot, p: VariantParams): Variant | undefined {
  return snapshot.variants.get(variantKey(p))
}
