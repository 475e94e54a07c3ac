/**
 * Feed snapshots on the front-end threads (README "Architecture", THREATFEED_HTTP_THREADS): the
 * main thread builds and owns every snapshot; each other thread holds a SnapshotReplica that
 * answers from the same bytes.
 *
 *   main: source swaps a snapshot ──► SnapshotExporter.publish ──► post {seq, lean} to every thread
 *                                                              └─► Atomics.add(generation)
 *   thread: getSnapshot ──► generation moved? ──► receiveMessageOnPort until drained ──► snapshot
 *           first body of a representation ──► {body} request, Atomics.wait ≤ 20 ms, then the poll awaits ◄── main posts the shared bytes
 *
 * One switch for all: the exporter posts to every thread before it moves the shared generation,
 * and a replica looks at the generation on every lookup and drains its port synchronously when it
 * moved, so once any thread (the main one included, which swaps in the same tick) has answered
 * from a new snapshot, no thread answers from the old one.
 *
 * One copy of each body: a thread gets headers, tags, dates and lengths (small, cloned) at once,
 * and the bytes of a body as a view of a SharedArrayBuffer the main thread holds — posting a view
 * of shared memory shares it. A body that is not in shared memory yet is copied there once
 * (build-snapshot.ts assembles into shared memory, so that is only the small bodies cut from a
 * build's local buffer, or a test's snapshots).
 *
 * The bytes come with the snapshot when a thread asked for that representation of the feed
 * before (the main thread assembles it at the swap, as it would have at the first request), else
 * on a thread's first answer from it: the thread waits up to BODY_SYNC_MS for the main thread,
 * then lets the poll await the bytes and answers every other poll meanwhile. It never blocks
 * longer on the main thread, whose rebuild slices and collections of a heap of millions of rules
 * last tens to hundreds of milliseconds (bench/NOTES.md "bigws": a thread that waited there held
 * every poll it had).
 */
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads'
import { isThreatfeedError, ThreatfeedError, type ErrorCode } from '../errors.js'
import type { FeedId, FeedSnapshot, HeaderList, Representation, Variant } from './snapshot-types.js'

/** What the main thread's feed side offers (FeedService, or a test's source). */
export interface SnapshotSource {
  getSnapshot (workspaceId: string, feedId: FeedId, now: number): FeedSnapshot | null
  awaitSnapshot (workspaceId: string, feedId: FeedId, now: number, built?: boolean): Promise<FeedSnapshot>
  awaitShards? (workspaceId: string, feedId: FeedId, of: number): Promise<FeedSnapshot>
  /** A poll a thread answered from one representation (FeedService.notePoll: what a served copy keeps). */
  notePoll? (workspaceId: string, feedId: FeedId, variantKey: string, gzip: boolean, at: number): void
  /** A poll's tag matched nothing in `snapshot`: the snapshot to answer with once another node's newer content is caught up (FeedService.fresher). */
  fresher? (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot): Promise<FeedSnapshot>
  /** Calls `listener` in the same tick as each swap (null: the snapshot was dropped); returns the unsubscribe. */
  onSwap (listener: (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null) => void): () => void
}

interface LeanRepresentation {
  readonly etag: string
  readonly headers: HeaderList
  readonly notModifiedHeaders: HeaderList
  readonly length: number
  /** The bytes in shared memory when some thread asked for them in an earlier snapshot of the feed; else null (fetched on first use). */
  readonly body: Uint8Array | null
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
  /** A served copy restored at start (FeedSnapshot.restored). */
  readonly restored: boolean
}

/** A poll a thread answered: workspace, feed, variant key, gzip, when. */
type PolledRepresentation = readonly [string, FeedId, string, boolean, number]

/** Polls a thread keeps between two reports at most (each is throttled per representation by the route). */
const MAX_POLLS_KEPT = 4096

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
  | { readonly type: 'await', readonly id: number, readonly workspaceId: string, readonly feedId: FeedId, readonly now: number, readonly built?: boolean }
  | { readonly type: 'shards', readonly id: number, readonly workspaceId: string, readonly feedId: FeedId, readonly of: number }
  | { readonly type: 'fresher', readonly id: number, readonly workspaceId: string, readonly feedId: FeedId, readonly seq: number }
  | { readonly type: 'touch', readonly fetches: ReadonlyArray<readonly [string, FeedId, number]>, readonly polls?: readonly PolledRepresentation[] }
  | { readonly type: 'body', readonly id: number, readonly seq: number, readonly key: string, readonly gzip: boolean }

export type ReplicaReply =
  | { readonly id: number, readonly seq: number, readonly error?: undefined }
  | { readonly id: number, readonly seq?: undefined, readonly error: WireError }

/** The answer to a body request, on the thread's `bodies` port. */
type BodyReply =
  | { readonly id: number, readonly body: Uint8Array, readonly error?: undefined }
  | { readonly id: number, readonly body?: undefined, readonly error: WireError }

/** The shared memory and ports of one thread, made by SnapshotExporter.addThread. */
export interface ReplicaChannels {
  /** Snapshots, in publish order. */
  readonly snapshots: MessagePort
  /** Body answers. */
  readonly bodies: MessagePort
  /** [0]: the exporter's generation (shared by every thread). */
  readonly generation: SharedArrayBuffer
  /** [0]: 1 once a body answer is on `bodies` (one per thread). */
  readonly mailbox: SharedArrayBuffer
}

const keyOf = (workspaceId: string, feedId: FeedId): string => `${workspaceId}\u0000${feedId}`

/** A representation of a feed's variant, as the exporter remembers which ones threads asked for. */
const representationOf = (variantKey: string, gzip: boolean): string => `${variantKey}\u0000${gzip ? 'gzip' : 'identity'}`

/** How long a poll waits for the main thread to hand over a body before it fails. */
const BODY_WAIT_MS = 5000

/**
 * How long a thread blocks for a body before it lets the poll await it instead. A body answered
 * within it keeps the answer synchronous, so pipelined requests on a connection stay in order
 * (uWS closes a connection whose next request arrives while an answer is pending); past it, a
 * busy main thread holds only the polls that need the body, not the thread.
 */
const BODY_SYNC_MS = 20

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
  /** Per feed, the representations some thread asked the bytes of: a new snapshot carries them. */
  readonly #asked = new Map<string, Set<string>>()
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
    if (snapshot === null) {
      this.#latest.delete(keyOf(workspaceId, feedId))
      this.#asked.delete(keyOf(workspaceId, feedId))
    } else {
      this.#latest.set(keyOf(workspaceId, feedId), message)
    }
    for (const t of this.#threads) t.snapshots.postMessage(message)
    Atomics.add(this.#generation, 0, 1)
  }

  /** Answers one request of the thread at `index` (the order of addThread). */
  async answer (index: number, m: ReplicaRequest, post: (reply: ReplicaReply) => void): Promise<void> {
    if (m.type === 'touch') {
      // A poll answered on a thread counts as a fetch here (idle feeds are released, fetches recorded).
      for (const [workspaceId, feedId, at] of m.fetches) this.#source.getSnapshot(workspaceId, feedId, at)
      for (const [workspaceId, feedId, key, gzip, at] of m.polls ?? []) this.#source.notePoll?.(workspaceId, feedId, key, gzip, at)
      return
    }
    if (m.type === 'body') {
      this.#answerBody(index, m)
      return
    }
    try {
      const snapshot = m.type === 'await'
        ? await this.#source.awaitSnapshot(m.workspaceId, m.feedId, m.now, m.built === true)
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
    const asked = this.#asked.get(keyOf(snapshot.workspaceId, snapshot.feedId))
    for (const [key, v] of snapshot.variants) {
      // Bytes a thread asked for before are assembled now, as its first request would have had
      // them assembled: its polls of the new snapshot then wait for nothing.
      const rep = (r: Representation, gzip: boolean): LeanRepresentation => ({
        etag: r.etag,
        headers: r.headers,
        notModifiedHeaders: r.notModifiedHeaders,
        length: r.length ?? r.body.byteLength,
        // A served copy's bytes are in hand already, and its polls come at once (a restart).
        body: asked?.has(representationOf(key, gzip)) === true || snapshot.restored === true ? this.#inShared(r.body) : null,
      })
      variants.push({ key, status: v.status, contentType: v.contentType, entries: v.entries, limit: v.limit, lastModified: v.lastModified, lastModifiedHttp: v.lastModifiedHttp, identity: rep(v.identity, false), gzip: rep(v.gzip, true) })
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
      restored: snapshot.restored === true,
    }
    this.#lean.set(snapshot, lean)
    this.#seqOf.set(snapshot, seq)
    this.#bySeq.set(seq, new WeakRef(snapshot))
    this.#forget.register(snapshot, seq)
    return lean
  }

  #answerBody (index: number, m: Extract<ReplicaRequest, { type: 'body' }>): void {
    const t = this.#threads[index]
    if (t === undefined) return
    let reply: BodyReply
    try {
      const snapshot = this.#bySeq.get(m.seq)?.deref()
      const variant = snapshot?.variants.get(m.key)
      if (snapshot === undefined || variant === undefined) throw new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: new Error(`snapshot ${m.seq} variant ${m.key} is gone`) })
      const feed = keyOf(snapshot.workspaceId, snapshot.feedId)
      let asked = this.#asked.get(feed)
      if (asked === undefined) this.#asked.set(feed, asked = new Set())
      asked.add(representationOf(m.key, m.gzip))
      reply = { id: m.id, body: this.#inShared(m.gzip ? variant.gzip.body : variant.identity.body) }
    } catch (e) {
      reply = { id: m.id, error: toWireError(e) }
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

/** A representation whose body came with the snapshot, or is fetched from the main thread on first use (a view of its shared bytes). */
class ReplicaRepresentation implements Representation {
  readonly etag: string
  readonly headers: HeaderList
  readonly notModifiedHeaders: HeaderList
  readonly length: number
  #body: Uint8Array | null
  #loading: Promise<void> | null = null

  constructor (lean: LeanRepresentation, readonly fetch: () => Uint8Array | Promise<Uint8Array>) {
    this.etag = lean.etag
    this.headers = lean.headers
    this.notModifiedHeaders = lean.notModifiedHeaders
    this.length = lean.length
    this.#body = lean.body
  }

  get body (): Uint8Array {
    if (this.#body === null) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error('a front-end thread read a body before whenBody() settled') })
    return this.#body
  }

  /** One fetch however many polls wait for it; a failed one is tried again by the next poll. */
  whenBody (): Promise<void> | null {
    if (this.#body !== null) return null
    if (this.#loading === null) {
      const got = this.fetch()
      if (got instanceof Uint8Array) {
        this.#body = got
        return null
      }
      this.#loading = got.then((bytes) => { this.#body = bytes }, (e: unknown) => {
        this.#loading = null
        throw e
      })
    }
    return this.#loading
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

  constructor (lean: LeanVariant, seq: number, key: string, fetch: (seq: number, key: string, gzip: boolean) => Uint8Array | Promise<Uint8Array>) {
    this.status = lean.status
    this.contentType = lean.contentType
    this.entries = lean.entries
    this.limit = lean.limit
    this.lastModified = lean.lastModified
    this.lastModifiedHttp = lean.lastModifiedHttp
    this.identity = new ReplicaRepresentation(lean.identity, () => fetch(seq, key, false))
    this.gzip = new ReplicaRepresentation(lean.gzip, () => fetch(seq, key, true))
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
  readonly #bodies = new Map<number, { resolve: (body: Uint8Array) => void, reject: (e: Error) => void, timer: NodeJS.Timeout }>()
  #seen = -1
  #nextId = 0
  #polls: PolledRepresentation[] = []
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
    channels.bodies.on('message', (m: BodyReply) => { this.#bodyArrived(m) })
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

  async awaitSnapshot (workspaceId: string, feedId: FeedId, now: number, built = false): Promise<FeedSnapshot> {
    const id = this.#nextId++
    await this.#ask({ type: 'await', id, workspaceId, feedId, now, ...(built ? { built } : {}) }, id)
    return this.#after(workspaceId, feedId)
  }

  /** Reported to the main thread with the fetches (the route throttles it per representation). */
  notePoll (workspaceId: string, feedId: FeedId, variantKey: string, gzip: boolean, at: number): void {
    if (this.#polls.length < MAX_POLLS_KEPT) this.#polls.push([workspaceId, feedId, variantKey, gzip, at])
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
    const stopping = (): ThreatfeedError => new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: new Error('front-end thread stopping') })
    for (const w of this.#pending.values()) w.reject(stopping())
    this.#pending.clear()
    for (const w of this.#bodies.values()) {
      clearTimeout(w.timer)
      w.reject(stopping())
    }
    this.#bodies.clear()
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
    const fetch = (seq: number, key: string, gzip: boolean): Uint8Array | Promise<Uint8Array> => this.#fetchBody(seq, key, gzip)
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
      ...(lean.restored ? { restored: true } : {}),
    }
  }

  /**
   * The bytes of one representation, from the main thread: at once when it answers within
   * BODY_SYNC_MS, else a promise (the answer arrives on the port's listener); fails after BODY_WAIT_MS.
   */
  #fetchBody (seq: number, key: string, gzip: boolean): Uint8Array | Promise<Uint8Array> {
    const id = this.#nextId++
    Atomics.store(this.#mailbox, 0, 0)
    this.#request({ type: 'body', id, seq, key, gzip })
    if (Atomics.wait(this.#mailbox, 0, 0, BODY_SYNC_MS) !== 'timed-out') {
      // Answers to earlier requests that went asynchronous may come first: they go to their waiters.
      for (let got = receiveMessageOnPort(this.#channels.bodies); got !== undefined; got = receiveMessageOnPort(this.#channels.bodies)) {
        const m = got.message as BodyReply
        if (m.id !== id) {
          this.#bodyArrived(m)
          continue
        }
        if (m.error !== undefined) throw fromWireError(m.error)
        return m.body
      }
    }
    return new Promise<Uint8Array>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#bodies.delete(id)
        reject(new ThreatfeedError('TF_ERR_FEED_UNAVAILABLE', [], { cause: new Error(`no body from the main thread within ${BODY_WAIT_MS} ms`) }))
      }, BODY_WAIT_MS)
      this.#bodies.set(id, { resolve, reject, timer })
    })
  }

  #bodyArrived (m: BodyReply): void {
    const waiter = this.#bodies.get(m.id)
    if (waiter === undefined) return
    this.#bodies.delete(m.id)
    clearTimeout(waiter.timer)
    if (m.error === undefined) waiter.resolve(m.body)
    else waiter.reject(fromWireError(m.error))
  }

  #flushTouches (): void {
    const fetches: Array<readonly [string, FeedId, number]> = []
    for (const held of this.#snapshots.values()) {
      if (held.touchedAt <= held.reportedAt) continue
      held.reportedAt = held.touchedAt
      fetches.push([held.snapshot.workspaceId, held.snapshot.feedId, held.touchedAt])
    }
    const polls = this.#polls
    if (polls.length > 0) this.#polls = []
    if (fetches.length > 0 || polls.length > 0) this.#request({ type: 'touch', fetches, ...(polls.length > 0 ? { polls } : {}) })
  }
}
