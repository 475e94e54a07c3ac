/**
 * Every message that crosses a thread boundary between the service and the feed workers.
 *
 *   main thread                                   worker (workers/feed-worker.ts)
 *   ───────────                                   ──────
 *   ComputeTask  (rule targets, geo ref)  ──────► expand, coalesce, carve, hash
 *                ◄──────  TaskOutcome<ComputeResult>  (prefix arrays, transferred)
 *   RenderTask   (prefixes, headers, cache) ────► render one stream of dialects, MD5, gzip
 *                ◄──────  TaskOutcome<RenderResult>   (text, local bytes, new chunks: transferred)
 *
 * Errors do not cross the boundary (on Node 20 a thrown error loses its code and class): a worker
 * answers `{ ok: false, code, message }` and src/pool/pool.ts turns that back into a registry
 * error. This folder may not import store/ or feed/ (STYLE.md), so the few unions shared with
 * them are spelled out here; they are the same strings as store/types.ts.
 */
import { move } from 'piscina'
import type { ErrorCode } from '../errors.js'
import type { GeoIndexData } from '../geo/geo-index.js'

export type WireFormat = 'plain' | 'dialect_a' | 'dialect_b' | 'nftables'
export type WireFamily = 'v4' | 'v6' | 'both'
export type WireAction = 'block' | 'allow'

/** What each worker starts with (Piscina's `workerData`; node:worker_threads' in the worker). */
export interface PoolWorkerData {
  /** The worker thread's nice value (thread-priority.ts); null: its creator's. */
  readonly nice: number | null
}

/**
 * Posted by a worker on its parent port when it starts a task: the pool's timeout measures the
 * run, not the wait in the queue (a burst of builds can queue for longer than one task may run).
 */
export interface TaskStarted { tfTaskStarted: number }

export function isTaskStarted (m: unknown): m is TaskStarted {
  return typeof m === 'object' && m !== null && typeof (m as TaskStarted).tfTaskStarted === 'number'
}

/** Fields the pool adds to every task. */
export interface TaskEnvelope {
  /** Pool-assigned id, echoed in TaskStarted. */
  token: number
}

export interface TaskFailure { ok: false, code: string, message: string }
export interface TaskSuccess<T> {
  ok: true
  value: T
  /** The answering thread and the geo index version it holds now (compute tasks). */
  held?: { threadId: number, geoVersion: number }
}
export type TaskOutcome<T> = TaskSuccess<T> | TaskFailure

/**
 * Answered by a worker that does not hold the geo index version a task names; the pool then
 * resends the task with the index attached. The pool attaches the index only until every live
 * thread has reported holding it (TaskSuccess.held), so each worker receives each version about
 * once, and then tasks carry only the version number.
 */
export const GEO_MISSING = 'TF_ERR_GEO_MISSING' satisfies ErrorCode

/** A geo index version, with the index itself only when the worker is known to need it. */
export interface GeoRef {
  version: number
  /** SharedArrayBuffer-backed: posting it shares the memory, nothing is copied. */
  data?: GeoIndexData
}

/** The targets of rules that share one (confidence, severity): one dialect_b group. */
export interface TargetGroup {
  confidence: string
  severity: string
  /**
   * Canonical CIDRs of the `ip` rules, each followed by `\n`: ASCII bytes, or a string (the
   * CLI and tests). The feed service writes them into a SharedArrayBuffer, which a task shares
   * with no copy; a string crosses as one copy, an array of 100,000 strings as 100,000 values.
   */
  ips: string | Uint8Array
  asns: number[]
  countries: string[]
}

export interface ComputeTask {
  geo: GeoRef
  /** Selected block rules by group. */
  block: TargetGroup[]
  /** Selected allow rules by group. */
  allow: TargetGroup[]
  /** Every allow rule of the workspace: carved out of the deny feed (DECISIONS §5). */
  carve: TargetGroup
  /** Everything else a body shows besides networks (name, description); enters the content hash. */
  meta: string
  /** Shard counts N to partition the networks into as well (src/feed/render/shard-networks.ts); absent or empty: none. */
  shards?: number[]
  /**
   * The IANA special-purpose space (src/feed/render/special-ranges.ts): 'detect' counts the
   * networks of it the feed would publish, 'drop' also leaves them out (publish guards, issue 21).
   */
  special?: 'detect' | 'drop'
  /**
   * The selected rules' targets with their expiries, per action: the lapse of each published
   * network is computed from them (ActionNetworks.lapse, src/feed/render/lapses.ts). Absent: none.
   */
  lapses?: { block: LapseTargets, allow: LapseTargets }
}

/** Targets of some rules with each one's expiry (ms; Infinity for never), in the same order. */
export interface LapseTargets {
  /** `ip` targets one a line, as TargetGroup.ips. */
  ips: string | Uint8Array
  /** The expiry of each line of `ips`. */
  ipExpiry: Float64Array
  asns: number[]
  asnExpiry: number[]
  countries: string[]
  countryExpiry: number[]
}

/** Coalesced prefixes in the PackedPrefixes layout of src/net/packed.ts. */
export interface WirePrefixes {
  /** Pairs `[addr, len]`. */
  v4: Uint32Array
  /** 5-tuples `[w0, w1, w2, w3, len]`. */
  v6: Uint32Array
}

export interface GroupPrefixes extends WirePrefixes {
  confidence: string
  severity: string
}

export interface ActionNetworks {
  /** The feed's networks: every group united, coalesced (and carved for `block`). */
  total: WirePrefixes
  /**
   * dialect_b groups, each coalesced on its own, in row-tie order. With one group its arrays
   * are those of `total` (the same buffers).
   */
  groups: GroupPrefixes[]
  /** Content hash per family: networks, groups and meta; format-independent (Last-Modified). */
  hash: Record<WireFamily, string>
  /** The shards asked for (ComputeTask.shards): for each N, its N parts in order (shard I is parts[I - 1]). */
  shards?: Array<{ of: number, parts: ActionNetworks[] }>
  /** With ComputeTask.lapses: when each prefix of `total` lapses (ms, Infinity for never), its IPv4 ones first. */
  lapse?: Float64Array
}

export interface ComputeResult {
  block: ActionNetworks
  allow: ActionNetworks
  /** Targets that could not be read (a corrupt rule): left out, reported for the log. */
  invalid: number
  /** With ComputeTask.special: networks of the special space per action (found, or left out when dropped). */
  special?: { block: number, allow: number }
}

/** Which dialects a render task writes: the ones that share their text. */
export type WireStream = 'lines' | 'rows' | 'nft'

/**
 * Compressed chunks (raw deflate, see src/feed/render/gzip.ts) the main thread already holds,
 * keyed by a digest of their uncompressed bytes and the level: `chunks[i]` is the chunk of
 * `keys[i]`. A render task carries those of the feed's previous build, so only changed chunks
 * are compressed again.
 */
export interface ChunkCache {
  keys: string[]
  /** Views of SharedArrayBuffers (see RenderResult.text): a task shares them, it does not copy them. */
  chunks: Uint8Array[]
  /** The previous build's text of the stream, whose unchanged chunks are copied, not written again. */
  text: TextCache | null
}

/** A stream's text and its pieces: content key, place and CRC-32 of each. */
export interface TextCache {
  /** Content key of the whole text (RenderResult.textKey). */
  key: string
  /** The whole of a SharedArrayBuffer (RenderResult.text): a task that makes the same text answers with it. */
  bytes: Uint8Array
  pieces: TextPieces
}

export interface TextPieces {
  keys: string[]
  /** keys.length + 1 offsets into the text. */
  offsets: Uint32Array
  crcs: Uint32Array
}

/** Chunks packed in one buffer (what a worker sends back: one transferable). */
export interface PackedChunks {
  keys: string[]
  /** keys.length + 1 offsets into `bytes`. */
  offsets: Uint32Array
  bytes: Uint8Array
}

export interface RenderTask {
  stream: WireStream
  action: WireAction
  networks: ActionNetworks
  /** dialect_a header fields. */
  name: string
  description: string
  /** Last-Modified (ms) per family: dialect_a's `# generated:` line. */
  generated: Record<WireFamily, number>
  /** Entry cap: a variant with more entries is a 413. */
  limit: number
  /** A list's feed (its cap can be raised) rather than the workspace feed: words the 413 hint. */
  listFeed: boolean
  gzipLevel: number
  cache: ChunkCache | null
  /** Set when `networks` are one shard of the feed: dialect_a's `# shard: I/N` line and the ETag name it. */
  shard?: { index: number, of: number } | null
}

export interface Span { source: SpanSource, offset: number, length: number }

/**
 * Where a body's bytes are (the first of each span triple):
 * - SOURCE_TEXT: RenderResult.text, the stream's text, which depends on the networks alone;
 * - SOURCE_LOCAL: RenderResult.local, this feed's own bytes (dialect_a headers, checksums, 413
 *   bodies, gzip framing);
 * - SOURCE_CHUNK: a whole compressed chunk; the offset is its index in RenderResult.chunkKeys.
 */
export const SOURCE_TEXT = 0
export const SOURCE_LOCAL = 1
export const SOURCE_CHUNK = 2
export type SpanSource = typeof SOURCE_TEXT | typeof SOURCE_LOCAL | typeof SOURCE_CHUNK

export interface RenderedRepresentation {
  etag: string
  /** Body length in bytes. */
  length: number
  /**
   * The body as the concatenation of spans, triples `[source, offset, length]`. One span is a
   * view with no copy; several (gzip bodies made of compressed chunks, dialect_a's header before
   * the shared lines) are assembled on first use, so unrequested bodies cost no memory of their own.
   */
  spans: number[]
  /** Content key of a body of several spans (identical bodies of several feeds are assembled once); null otherwise. */
  key: string | null
  /** SHA-256 of the body as sent, base64: the Content-Digest field's value (RFC 9530 §2). */
  sha256: string
}

export interface RenderedVariant {
  format: WireFormat
  family: WireFamily
  checksum: boolean
  status: 200 | 413
  /** Networks, or rows for dialect_b. */
  entries: number
  identity: RenderedRepresentation
  gzip: RenderedRepresentation
}

export interface RenderResult {
  /**
   * The stream's text, every family once (see src/feed/render/render-stream.ts): it depends on the
   * networks only, so feeds selecting the same networks hold one copy (keyed by textKey). Shared
   * memory, because it goes back to a worker with the next build of the feed (ChunkCache.text),
   * whose unchanged chunks are copied from it: shared, that costs the main thread nothing, where
   * cloning it cost 1–10 ms of the event loop per task (measured on the 4.4 MB dialect_b text).
   */
  text: SharedArrayBuffer
  /** Content key of `text`. */
  textKey: string
  /** The pieces `text` is made of, for the next build of the feed (ChunkCache.text). */
  textPieces: TextPieces
  /** The feed's own bytes: headers, checksums, 413 bodies, gzip framing and small compressed pieces. */
  local: ArrayBuffer
  /** Every compressed chunk the gzip bodies use, in order of first use (SOURCE_CHUNK spans index it). */
  chunkKeys: string[]
  /** The chunks of chunkKeys that the task's cache did not hold, compressed by this task. */
  fresh: PackedChunks
  variants: RenderedVariant[]
}

/**
 * Delta bodies a build renders ahead of the polls that will ask for them (src/http/feed-delta.ts):
 * each job is one variant's removed and added networks (already one family and shard) and the
 * names its body writes; src/feed/render/delta-text.ts renders them.
 */
export interface DeltaJob {
  format: 'plain' | 'nftables' | 'ipset' | 'json'
  removed: WirePrefixes
  added: WirePrefixes
  names: { table: string, set: string }
}

export interface DeltaTask {
  jobs: DeltaJob[]
}

/** Per job, the identity body and its gzip (transferred). */
export interface DeltaResult {
  bodies: Array<{ identity: Uint8Array, gzip: Uint8Array }>
}

/**
 * Marks a worker's answer so Piscina transfers (moves) the listed buffers instead of cloning them.
 * Buffers listed twice are listed once (a transfer list must not repeat one).
 */
export function transferOutcome<T> (outcome: TaskOutcome<T>, buffers: ArrayBufferLike[]): TaskOutcome<T> {
  const list = [...new Set(buffers.filter((b): b is ArrayBuffer => b instanceof ArrayBuffer && b.byteLength > 0))]
  if (list.length === 0) return outcome
  // Piscina's Transferable protocol: the value to post and the list to transfer, under its two
  // global symbols; move() then marks the box so the worker posts it with the list.
  const box = {
    [Symbol.for('Piscina.transferable')]: list,
    [Symbol.for('Piscina.valueOf')]: outcome,
  }
  return move(box as unknown as Parameters<typeof move>[0]) as unknown as TaskOutcome<T>
}
