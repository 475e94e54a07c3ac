/**
 * Feed snapshots on the front-end threads (README "Architecture", THREATFEED_HTTP_THREADS): the
 * main thread builds and owns every snapshot; each other thread holds a SnapshotReplica that
 * answers from the same bytes.
 *
 *   main: source swaps a snapshot ──► SnapshotExporter.publish ──► post {seq, lean} to every thread
 *                                                              └─► Atomics.add(generation)
 *   thread: getSnapshot ──► generation moved? ──► receiveMessageOnPort until drained ──► snapshot
 *           first body of a variant ──► {body} request + Atomics.wait ◄── main posts the shared bytes
 *
 * One switch for all: the exporter posts to every thread before it moves the shared generation,
 * and a replica looks at the generation on every lookup and drains its port synchronously when it
 * moved, so once any thread (the main one included, which swaps in the same tick) has answered
 * from a new snapshot, no thread answers from the old one.
 *
 * One copy of each body: a thread gets headers, tags and dates (small, cloned) at once, and the
 * bytes of a body only when it first sends them, as a view of a SharedArrayBuffer the main
 * thread holds — posting a view of shared memory shares it. A body that is not in shared memory
 * yet is copied there once (build-snapshot.ts assembles into shared memory, so that is only the
 * small bodies cut from a build's local buffer, or a test's snapshots).
 */
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads'
import { isThreatfeedError, ThreatfeedError, type ErrorCode } from '../errors.js'
import type { FeedId, FeedSnapshot, HeaderList, Representation, Variant } from './snapshot-types.js'

/** What the main thread's feed side offers (FeedService, or a test's source). */
export interface SnapshotSource {
  getSnapshot (workspaceId: string, feedId: FeedId, now: number): FeedSnapshot | null
  awaitSnapshot (workspaceId: string, feedId: FeedId, now: number): Promise<FeedSnapshot>
  awaitShards? (workspaceId: string, feedId: FeedId, of: number): Promise<FeedSnapshot>
  /** A poll's tag matched nothing in `snapshot`: the snapshot to answer with once another node's newer content is caught up (FeedService.fresher). */
  fresher? (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot): Promise<FeedSnapshot>
  /** Calls `listener` in the same tick as each swap (null: the snapshot was dropped); returns the unsubscribe. */
  onSwap (listener: (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null) => void): () => void
}

interface LeanRepresentation {
  readonly etag: string
  readonly headers: HeaderList
  readonly notModifiedHeaders: HeaderList
}

interface LeanVariant {
  readonly key: string
  readonly status: 200 | 413
  readonly contentType: string
  readonly entries: number
  readonly limit: number
  readonly lastModified: number
  readonly lastModifiedHttp: string
  readonly identity: LeanRepresentation
  readonly gzip: LeanRepresentation
}

/** A snapshot without its bytes and without explain's prefix arrays (explain runs on the main thread). */
interface LeanSnapshot {
  readonly seq: number
  readonly workspaceId: string
  readonly feedId: FeedId
  readonly name: string
  readonly defaults: FeedSnapshot['defaults']
  readonly limit: number
  readonly builtAt: number
  readonly expiresAt: number
  readonly shardCounts: readonly number[]
  readonly networks: FeedSnapshot['networks']
  readonly variants: readonly LeanVariant[]
}

/** Posted on a thread's snapshot port. */
interface SnapshotMessage { readonly seq: number, readonly workspaceId: string, readonly feedId: FeedId, readonly snapshot: LeanSnapshot | null }

/** The error of a request made to the main thread, as it crosses (a class does not). */
export interface WireError { readonly code: string | null, readonly message: string, readonly details?: unknown }

export function toWireError (e: unknown): WireError {
  if (isThreatfeedError(e)) return { code: e.code, message: e.message, ...(e.details === undefined ? {} : { details: e.details }) }
  return { code: null, message: (e as Error)?.message ?? String(e) }
}

export function fromWireError (w: WireError): Error {
  if (w.code === null) return new Error(w.message)
  const e = new ThreatfeedError(w.code as ErrorCode, [], w.details === undefined ? {} : { details: w.details })
  e.message = w.message
  return e
}

/** Requests a replica makes of the main thread (answered by SnapshotExporter.answer). */
export type ReplicaRequest =
  | { readonly type: 'await', readonly id: number, readonly workspaceId: string, readonly feedId: FeedId, readonly now: number }
  | { readonly type: 'shards', readonly id: number, readonly workspaceId: string, readonly feedId: FeedId, readonly of: number }
  | { readonly type: 'fresher', readonly id: number, readonly workspaceId: string, readonly feedId: FeedId, readonly seq: number }
  | { readonly type: 'touch', readonly fetches: ReadonlyArray<readonly [string, FeedId, number]> }
  | { readonly type: 'body', readonly seq: number, readonly key: string }

export type ReplicaReply =
  | { readonly id: number, readonly seq: number, readonly error?: undefined }
  | { readonly id: number, readonly seq?: undefined, readonly error: WireError }

/** The shared memory and ports of one thread, made by SnapshotExporter.addThread. */
export interface ReplicaChannels {
  /** Snapshots, in publish order. */
  readonly snapshots: MessagePort
  /** Body answers, read synchronously after the mailbox is set. */
  readonly bodies: MessagePort
  /** [0]: the exporter's generation (shared by every thread). */
  readonly generation: SharedArrayBuffer
  /** [0]: 1 once the body answer is on `bodies` (one per thread). */
  readonly mailbox: SharedArrayBuffer
}

const keyOf = (workspaceId: string, feedId: FeedId): string => `${workspaceId}\u0000${feedId}`

/** How long a thread waits for the main thread to hand over a body before the request fails. */
const BODY_WAIT_MS = 5000

/** The main thread's side: one per process. */
export class SnapshotExporter {
  readonly #source: SnapshotSource
  readonly #generation = new Int32Array(new SharedArrayBuffer(4))
  readonly #threads: Array<{ snapshots: MessagePort, bodies: MessagePort, mailbox: Int32Array }> = []
  /** The last message of each feed, for a thread that starts later. */
  readonly #latest = new Map<string, SnapshotMessage>()
  readonly #seqOf = new WeakMap<FeedSnapshot, number>()
  readonly #lean = new WeakMap<FeedSnapshot, LeanSnapshot>()
  /** Snapshots by seq while something still holds them (a thread may ask a body of one just replaced). */
  readonly #bySeq = new Map<number, WeakRef<FeedSnapshot>>()
  readonly #forget = new FinalizationRegistry<number>((seq) => { if (this.#bySeq.get(seq)?.deref() === undefined) this.#bySeq.delete(seq) })
  readonly #shared = new WeakMap<Uint8Array, Uint8Array>()
  #seq = 0
  readonly #unsubscribe: () => void

  constructor (source: SnapshotSource) {
    this.#source = source
    this.#unsubscribe = source.onSwap((workspaceId, feedId, snapshot) => { this.publish(workspaceId, feedId, snapshot) })
  }

  /** The channels of a new thread; it is sent every current snapshot at once. */
  addThread (snapshots: MessagePort, bodies: MessagePort): Omit<ReplicaChannels, 'snapshots' | 'bodies'> {
    const mailbox = new Int32Array(new SharedArrayBuffer(4))
    this.#threads.push({ snapshots, bodies, mailbox })
    for (const m of this.#latest.values()) snapshots.postMessage(m)
    return { generation: this.#generation.buffer as SharedArrayBuffer, mailbox: mailbox.buffer as SharedArrayBuffer }
  }

  /** Every thread gets the swap before the generation moves (see the header). */
  publish (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null): void {
    const message: SnapshotMessage = { seq: ++this.#seq, workspaceId, feedId, snapshot: snapshot === null ? null : this.#leanOf(snapshot, this.#seq) }
    if (snapshot === null) this.#latest.delete(keyOf(workspaceId, feedId))
    else this.#latest.set(keyOf(workspaceId, feedId), message)
    for (const t of this.#threads) t.snapshots.postMessage(message)
    Atomics.add(this.#generation, 0, 1)
  }

  /** Answers one request of the thread at `index` (the order of addThread). */
  async answer (index: number, m: ReplicaRequest, post: (reply: ReplicaReply) => void): Promise<void> {
    if (m.type === 'touch') {
      // A poll answered on a thread counts as a fetch here (idle feeds are released, fetches recorded).
      for (const [workspaceId, feedId, at] of m.fetches) this.#source.getSnapshot(workspaceId, feedId, at)
      return
    }
    if (m.type === 'body') {
      this.#answerBody(index, m.seq, m.key)
      return
    }
    try {
      const snapshot = m.type === 'await'
        ? await this.#source.awaitSnapshot(m.workspaceId, m.feedId, m.now)
        : m.type === 'shards'
          ? await this.#awaitShards(m.workspaceId, m.feedId, m.of)
          : await this.#fresher(m.workspaceId, m.feedId, m.seq)
      post({ id: m.id, seq: this.#ensurePublished(snapshot) })
    } catch (e) {
      post({ id: m.id, error: toWireError(e) })
    }
  }

  close (): void {
    this.#unsubscribe()
    for (const t of this.#threads) {
      t.snapshots.close()
      t.bodies.close()
    }
    this.#threads.length = 0
  }

  /** The thread's snapshot `seq` (a poll's tag matched nothing in it): as the source answers for it. */
  #fresher (workspaceId: string, feedId: FeedId, seq: number): Promise<FeedSnapshot> {
    const snapshot = this.#bySeq.get(seq)?.deref()
    // Gone: the main thread swapped since, so its current snapshot is already the fresher one.
    if (this.#source.fresher === undefined || snapshot === undefined) return this.#source.awaitSnapshot(workspaceId, feedId, Date.now())
    return this.#source.fresher(workspaceId, feedId, snapshot)
  }

  #awaitShards (workspaceId: string, feedId: FeedId, of: number): Promise<FeedSnapshot> {
    if (this.#source.awaitShards === undefined) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error('this feed source builds no shards on demand') })
    return this.#source.awaitShards(workspaceId, feedId, of)
  }

  /** A snapshot a source returned without a swap (a source that builds on request): published now. */
  #ensurePublished (snapshot: FeedSnapshot): number {
    // Published already: the thread has it, or something newer that it must keep.
    const seq = this.#seqOf.get(snapshot)
    if (seq !== undefined) return Math.max(seq, this.#latest.get(keyOf(snapshot.workspaceId, snapshot.feedId))?.seq ?? seq)
    this.publish(snapshot.workspaceId, snapshot.feedId, snapshot)
    return this.#seq
  }

  #leanOf (snapshot: FeedSnapshot, seq: number): LeanSnapshot {
    let lean = this.#lean.get(snapshot)
    if (lean !== undefined) {
      this.#seqOf.set(snapshot, seq)
      this.#bySeq.set(seq, new WeakRef(snapshot))
      this.#forget.register(snapshot, seq)
      return { ...lean, seq }
    }
    const variants: LeanVariant[] = []
    for (const [key, v] of snapshot.variants) {
      const rep = (r: Representation): LeanRepresentation => ({ etag: r.etag, headers: r.headers, notModifiedHeaders: r.notModifiedHeaders })
      variants.push({ key, status: v.status, contentType: v.contentType, entries: v.entries, limit: v.limit, lastModified: v.lastModified, lastModifiedHttp: v.lastModifiedHttp, identity: rep(v.identity), gzip: rep(v.gzip) })
    }
    lean = {
      seq,
      workspaceId: snapshot.workspaceId,
      feedId: snapshot.feedId,
      name: snapshot.name,
      defaults: snapshot.defaults,
      limit: snapshot.limit,
      builtAt: snapshot.builtAt,
      expiresAt: snapshot.expiresAt,
      shardCounts: snapshot.shardCounts,
      networks: snapshot.networks,
      variants,
    }
    this.#lean.set(snapshot, lean)
    this.#seqOf.set(snapshot, seq)
    this.#bySeq.set(seq, new WeakRef(snapshot))
    this.#forget.register(snapshot, seq)
    return lean
  }

  #answerBody (index: number, seq: number, key: string): void {
    const t = this.#threads[index]
    if (t === undefined) return
    let reply: { identity: Uint8Array, gzip: Uint8Array } | { error: WireError }
    try {
      const variant = this.#bySeq.get(seq)?.deref()?.variants.get(key)
      if (variant === undefined) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: new Error(`snapshot ${seq} variant ${key} is gone`) })
      reply = { identity: this.#inShared(variant.identity.body), gzip: this.#inShared(variant.gzip.body) }
    } catch (e) {
      reply = { error: toWireError(e) }
    }
    t.bodies.postMessage(reply)
    Atomics.store(t.mailbox, 0, 1)
    Atomics.notify(t.mailbox, 0)
  }

  /** The bytes in shared memory: as they are, or copied there once. */
  #inShared (bytes: Uint8Array): Uint8Array {
    if (bytes.buffer instanceof SharedArrayBuffer) return bytes
    let shared = this.#shared.get(bytes)
    if (shared === undefined) {
      shared = new Uint8Array(new SharedArrayBuffer(bytes.byteLength))
      shared.set(bytes)
      this.#shared.set(bytes, shared)
    }
    return shared
  }
}

/** A representation whose body is fetched from the main thread on first read (a view of its shared bytes). */
class ReplicaRepresentation implements Representation {
  readonly etag: string
  readonly headers: HeaderList
  readonly notModifiedHeaders: HeaderList
  #body: Uint8Array | null = null

  constructor (lean: LeanRepresentation, readonly variant: ReplicaVariant, readonly gzipped: boolean) {
    this.etag = lean.etag
    this.headers = lean.headers
    this.notModifiedHeaders = lean.notModifiedHeaders
  }

  get body (): Uint8Array {
    if (this.#body === null) this.variant.fetchBodies()
    return this.#body!
  }

  setBody (bytes: Uint8Array): void {
    this.#body = bytes
  }
}

class ReplicaVariant implements Variant {
  readonly status: 200 | 413
  readonly contentType: string
  readonly identity: ReplicaRepresentation
  readonly gzip: ReplicaRepresentation
  readonly entries: number
  readonly limit: number
  readonly lastModified: number
  readonly lastModifiedHttp: string

  constructor (lean: LeanVariant, readonly seq: number, readonly key: string, readonly fetch: (v: ReplicaVariant) => void) {
    this.status = lean.status
    this.contentType = lean.contentType
    this.entries = lean.entries
    this.limit = lean.limit
    this.lastModified = lean.lastModified
    this.lastModifiedHttp = lean.lastModifiedHttp
    this.identity = new ReplicaRepresentation(lean.identity, this, false)
    this.gzip = new ReplicaRepresentation(lean.gzip, this, true)
  }

  fetchBodies (): void {
    this.fetch(this)
  }
}

/** A thread's snapshot of one feed; a poll only stamps `touchedAt` (no allocation on the hot path). */
interface Held { readonly seq: number, readonly snapshot: FeedSnapshot, touchedAt: number, reportedAt: number }

const NO_PREFIXES = { v4: new Uint32Array(0), v6: new Uint32Array(0) }

/** The thread's side: a FeedSource (http/feed-routes.ts) over the main thread's snapshots. */
export class SnapshotReplica {
  readonly #channels: ReplicaChannels
  readonly #generation: Int32Array
  readonly #mailbox: Int32Array
  readonly #request: (m: ReplicaRequest) => void
  readonly #snapshots = new Map<string, Held>()
  readonly #pending = new Map<number, { resolve: (seq: number) => void, reject: (e: Error) => void }>()
  #seen = -1
  #nextId = 0
  readonly #touchTimer: NodeJS.Timeout

  /**
   * `request` posts to the main thread (answered through SnapshotExporter.answer, replies handed
   * to `reply`); fetches are reported every `touchMs`.
   */
  constructor (channels: ReplicaChannels, request: (m: ReplicaRequest) => void, touchMs = 1000) {
    this.#channels = channels
    this.#generation = new Int32Array(channels.generation)
    this.#mailbox = new Int32Array(channels.mailbox)
    this.#request = request
    channels.snapshots.on('message', (m: SnapshotMessage) => { this.#apply(m) })
    this.#touchTimer = setInterval(() => { this.#flushTouches() }, touchMs)
    this.#touchTimer.unref()
  }

  getSnapshot (workspaceId: string, feedId: FeedId, now: number): FeedSnapshot | null {
    if (Atomics.load(this.#generation, 0) !== this.#seen) this.#drain()
    const key = keyOf(workspaceId, feedId)
    const held = this.#snapshots.get(key)
    if (held === undefined || now >= held.snapshot.expiresAt) return null
    held.touchedAt = now
    return held.snapshot
  }

  async awaitSnapshot (workspaceId: string, feedId: FeedId, now: number): Promise<FeedSnapshot> {
    const id = this.#nextId++
    await this.#ask({ type: 'await', id, workspaceId, feedId, now }, id)
    return this.#after(workspaceId, feedId)
  }

  async awaitShards (workspaceId: string, feedId: FeedId, of: number): Promise<FeedSnapshot> {
    const id = this.#nextId++
    await this.#ask({ type: 'shards', id, workspaceId, feedId, of }, id)
    return this.#after(workspaceId, feedId)
  }

  /** As FeedService.fresher, asked of the main thread (a node hop must not cost a download on any thread). */
  async fresher (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot): Promise<FeedSnapshot> {
    const held = this.#snapshots.get(keyOf(workspaceId, feedId))
    if (held === undefined || held.snapshot !== snapshot) return this.#after(workspaceId, feedId)
    const id = this.#nextId++
    await this.#ask({ type: 'fresher', id, workspaceId, feedId, seq: held.seq }, id)
    return this.#after(workspaceId, feedId)
  }

  /** A reply from the main thread (the port's other messages are the caller's). */
  reply (m: ReplicaReply): void {
    const waiter = this.#pending.get(m.id)
    if (waiter === undefined) return
    this.#pending.delete(m.id)
    if (m.error === undefined) waiter.resolve(m.seq)
    else waiter.reject(fromWireError(m.error))
  }

  close (): void {
    clearInterval(this.#touchTimer)
    this.#flushTouches()
    this.#channels.snapshots.close()
    this.#channels.bodies.close()
    for (const w of this.#pending.values()) w.reject(new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: new Error('front-end thread stopping') }))
    this.#pending.clear()
  }

  #ask (m: ReplicaRequest, id: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject })
      this.#request(m)
    })
  }

  /** The feed's snapshot once the reply came: it was published before the reply was posted. */
  #after (workspaceId: string, feedId: FeedId): FeedSnapshot {
    this.#drain()
    const s = this.#snapshots.get(keyOf(workspaceId, feedId))?.snapshot
    if (s === undefined) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: new Error('the snapshot was dropped before this thread saw it') })
    return s
  }

  #drain (): void {
    this.#seen = Atomics.load(this.#generation, 0)
    for (;;) {
      const got = receiveMessageOnPort(this.#channels.snapshots)
      if (got === undefined) return
      this.#apply(got.message as SnapshotMessage)
    }
  }

  #apply (m: SnapshotMessage): void {
    const key = keyOf(m.workspaceId, m.feedId)
    const held = this.#snapshots.get(key)
    if (held !== undefined && held.seq >= m.seq) return
    if (m.snapshot === null) this.#snapshots.delete(key)
    else this.#snapshots.set(key, { seq: m.seq, snapshot: this.#build(m.snapshot), touchedAt: held?.touchedAt ?? 0, reportedAt: held?.reportedAt ?? 0 })
  }

  #build (lean: LeanSnapshot): FeedSnapshot {
    const fetch = (v: ReplicaVariant): void => { this.#fetchBodies(v) }
    const variants = new Map<string, Variant>()
    for (const v of lean.variants) variants.set(v.key, new ReplicaVariant(v, lean.seq, v.key, fetch))
    const none = { total: NO_PREFIXES, groups: [] }
    return {
      workspaceId: lean.workspaceId,
      feedId: lean.feedId,
      name: lean.name,
      defaults: lean.defaults,
      limit: lean.limit,
      builtAt: lean.builtAt,
      expiresAt: lean.expiresAt,
      shardCounts: lean.shardCounts,
      networks: lean.networks,
      variants,
      // Explain answers on the main thread (its routes are forwarded there).
      published: { block: none, allow: none },
    }
  }

  /** Blocks this thread until the main thread hands over the variant's two bodies (once per variant). */
  #fetchBodies (v: ReplicaVariant): void {
    Atomics.store(this.#mailbox, 0, 0)
    this.#request({ type: 'body', seq: v.seq, key: v.key })
    const waited = Atomics.wait(this.#mailbox, 0, 0, BODY_WAIT_MS)
    const got = receiveMessageOnPort(this.#channels.bodies)?.message as { identity: Uint8Array, gzip: Uint8Array } | { error: WireError } | undefined
    if (got === undefined) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: new Error(`no body from the main thread (${waited})`) })
    if ('error' in got) throw fromWireError(got.error)
    v.identity.setBody(got.identity)
    v.gzip.setBody(got.gzip)
  }

  #flushTouches (): void {
    const fetches: Array<readonly [string, FeedId, number]> = []
    for (const held of this.#snapshots.values()) {
      if (held.touchedAt <= held.reportedAt) continue
      held.reportedAt = held.touchedAt
      fetches.push([held.snapshot.workspaceId, held.snapshot.feedId, held.touchedAt])
    }
    if (fetches.length > 0) this.#request({ type: 'touch', fetches })
  }
}
