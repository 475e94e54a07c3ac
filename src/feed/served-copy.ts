/**
 * Served copies (issue 35, item 5): the bytes of a feed's last published version, as the variants
 * appliances polled were served, kept in the store (FeedVersionStore#saveServed) so that a
 * restarted node answers those polls at once — the same bytes, ETag and Last-Modified, a 304 for
 * a matching If-None-Match — while its first build of the feed runs (seconds to minutes for
 * millions of rules), and switches to its own build when it lands.
 *
 *   swap of a built snapshot ──► pick the variants polled in the last idleMs, most recent first,
 *     within the per-feed bound ──► encode (metadata JSON + each variant's gzip body) ──► saveServed
 *     (evicting the copies saved longest ago past the total bound)
 *   start ──► listServed ──► loadServed ──► checks against the store ──► gunzip ──► restored snapshot
 *
 * Only the gzip body is kept: the identity body is its gunzip (zlib checks the CRC-32 and the
 * length of what it inflates), while the gzip bytes could not be remade from the identity ones
 * short of the build's own chunked compression. Every header of both encodings is kept as served.
 *
 * A copy is not served (the feed waits for its build, as before) when its expiresAt — the
 * earliest lapse of a rule in it — has passed, when its list was deleted or its settings changed
 * (updatedAt), or its workspace deleted, renamed or its guards changed since it was saved. A
 * variant whose Last-Modified is no longer the store's feed-version record's (newer content was
 * built after the save, by this node or another) is left out. Keys are checked by the
 * authenticator as for any poll: a key revoked while the node was down is refused.
 */
import { gunzip } from 'node:zlib'
import { promisify } from 'node:util'
import type { Logger } from '../log.js'
import { FAMILIES, FEED_ACTIONS, type Family, type FeedAction, type FeedRef, type ListDefaults, type ServedCopyEntry, type Store } from '../store/types.js'
import type { FeedId, FeedSnapshot, HeaderList, Representation, Variant } from './snapshot-types.js'

const inflate = promisify(gunzip)

/** Format of an encoded copy; another is ignored (as no copy). */
const COPY_FORMAT = 1

export interface ServedCopyBounds {
  /** Most bytes of one feed's copy (THREATFEED_SERVED_COPY_FEED_BYTES). */
  readonly feedBytes: number
  /** Most bytes of every feed's copy together (THREATFEED_SERVED_COPY_BYTES); 0: no copies. */
  readonly totalBytes: number
}

/** What a copy was built under: checked against the store at start. */
interface CopyBasis {
  /** The list's updatedAt; null for the workspace feed. */
  readonly listUpdatedAt: number | null
  /** The workspace's name and guards (the workspace feed's dialect_a header and hold). */
  readonly workspaceName: string
  readonly workspaceGuards: string
}

interface StoredRepresentation {
  readonly etag: string
  readonly headers: HeaderList
  readonly notModifiedHeaders: HeaderList
  readonly length: number
}

interface StoredVariant {
  readonly key: string
  readonly status: 200 | 413
  readonly contentType: string
  readonly entries: number
  readonly limit: number
  readonly lastModified: number
  readonly lastModifiedHttp: string
  readonly identity: StoredRepresentation
  readonly gzip: StoredRepresentation
  /** When each encoding was last polled (0: not), so a restarted node keeps choosing them. */
  readonly polled: { readonly identity: number, readonly gzip: number }
  /** Offset and length of its gzip body in the copy's bytes. */
  readonly at: number
  readonly bytes: number
}

interface CopyMeta {
  readonly format: number
  readonly workspaceId: string
  readonly feedId: FeedId
  readonly name: string
  readonly defaults: ListDefaults | null
  readonly limit: number
  readonly builtAt: number
  /** null: Infinity (no rule lapses). */
  readonly expiresAt: number | null
  readonly shardCounts: readonly number[]
  readonly networks: FeedSnapshot['networks']
  readonly basis: CopyBasis
  readonly variants: readonly StoredVariant[]
}

/** A feed's representation, as the polls of it are noted: `${variantKey}\0identity` or `…\0gzip`. */
export function pollKey (variantKey: string, gzip: boolean): string {
  return `${variantKey}\u0000${gzip ? 'gzip' : 'identity'}`
}

/**
 * The copy of `snapshot`'s variants polled since `since`, most recently polled first, within
 * `maxBytes`; null when none was polled (the stored copy, if any, is left as it is).
 */
export function encodeServedCopy (snapshot: FeedSnapshot, basis: CopyBasis, polls: ReadonlyMap<string, number>, since: number, maxBytes: number): { bytes: Uint8Array, tags: string } | null {
  const picked: Array<{ key: string, v: Variant, last: number, identity: number, gzip: number }> = []
  for (const [key, v] of snapshot.variants) {
    const identity = polls.get(pollKey(key, false)) ?? 0
    const gzip = polls.get(pollKey(key, true)) ?? 0
    const last = Math.max(identity, gzip)
    if (last > since) picked.push({ key, v, last, identity: identity > since ? identity : 0, gzip: gzip > since ? gzip : 0 })
  }
  if (picked.length === 0) return null
  picked.sort((a, b) => b.last - a.last)
  const header = 4096 + 2048 * picked.length
  const variants: StoredVariant[] = []
  const bodies: Uint8Array[] = []
  let at = 0
  for (const p of picked) {
    const body = p.v.gzip.body
    // The most recently polled first: what does not fit is what appliances asked for least lately.
    if (header + at + body.byteLength > maxBytes) continue
    variants.push({
      key: p.key,
      status: p.v.status,
      contentType: p.v.contentType,
      entries: p.v.entries,
      limit: p.v.limit,
      lastModified: p.v.lastModified,
      lastModifiedHttp: p.v.lastModifiedHttp,
      identity: storedRep(p.v.identity),
      gzip: storedRep(p.v.gzip),
      polled: { identity: p.identity, gzip: p.gzip },
      at,
      bytes: body.byteLength,
    })
    bodies.push(body)
    at += body.byteLength
  }
  if (variants.length === 0) return null
  const meta: CopyMeta = {
    format: COPY_FORMAT,
    workspaceId: snapshot.workspaceId,
    feedId: snapshot.feedId,
    name: snapshot.name,
    defaults: snapshot.defaults,
    limit: snapshot.limit,
    builtAt: snapshot.builtAt,
    expiresAt: Number.isFinite(snapshot.expiresAt) ? snapshot.expiresAt : null,
    shardCounts: snapshot.shardCounts,
    networks: snapshot.networks,
    basis,
    variants,
  }
  const json = Buffer.from(JSON.stringify(meta))
  const out = Buffer.allocUnsafe(4 + json.length + at)
  out.writeUInt32BE(json.length, 0)
  json.copy(out, 4)
  let o = 4 + json.length
  for (const b of bodies) {
    out.set(b, o)
    o += b.byteLength
  }
  return { bytes: out, tags: variants.map((v) => `${v.key}=${v.gzip.etag}`).join(',') }
}

function storedRep (r: Representation): StoredRepresentation {
  return { etag: r.etag, headers: r.headers, notModifiedHeaders: r.notModifiedHeaders, length: r.length ?? r.body.byteLength }
}

function decodeMeta (bytes: Uint8Array): { meta: CopyMeta, bodies: Uint8Array } | null {
  if (bytes.byteLength < 4) return null
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const n = view.readUInt32BE(0)
  if (4 + n > view.length) return null
  const meta = JSON.parse(view.subarray(4, 4 + n).toString()) as CopyMeta
  if (meta.format !== COPY_FORMAT) return null
  return { meta, bodies: view.subarray(4 + n) }
}

/** Bytes in shared memory: the front-end threads answer from them without a copy of their own (snapshot-port.ts). */
function toShared (bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(new SharedArrayBuffer(bytes.byteLength))
  out.set(bytes)
  return out
}

/** A representation of a restored variant: its bytes in hand. */
function restoredRep (r: StoredRepresentation, body: Uint8Array): Representation {
  return { body, etag: r.etag, headers: r.headers, notModifiedHeaders: r.notModifiedHeaders, length: r.length }
}

/** `format|family|action|md5[|i/N]` → the feed-version key's list id, family and action. */
function versionOf (feedId: FeedId, key: string): { listId: string, family: Family, action: FeedAction } | null {
  const [, family, action, , shard] = key.split('|')
  if (!(FAMILIES as readonly string[]).includes(family ?? '') || !(FEED_ACTIONS as readonly string[]).includes(action ?? '')) return null
  return { listId: shard === undefined ? feedId : `${feedId}#${shard}`, family: family as Family, action: action as FeedAction }
}

/** Why a copy is not served, or null when it may be (read from the store now). */
async function refusal (store: Store, meta: CopyMeta, now: number): Promise<string | null> {
  if (meta.expiresAt !== null && now >= meta.expiresAt) return 'a rule in it lapsed'
  const ws = await store.workspaces.get(meta.workspaceId)
  if (ws === null || ws.deletedAt !== null) return 'workspace deleted'
  if (meta.feedId === '*') {
    if (ws.name !== meta.basis.workspaceName) return 'workspace renamed'
    if (JSON.stringify(ws.feedGuards ?? null) !== meta.basis.workspaceGuards) return 'workspace guards changed'
    return null
  }
  const list = await store.lists.get(meta.feedId)
  if (list === null || list.workspaceId !== meta.workspaceId) return 'list deleted'
  if (list.updatedAt !== meta.basis.listUpdatedAt) return 'list settings changed'
  return null
}

/** The basis of a copy of a feed now: what refusal() checks it against at the next start. */
export function copyBasis (listUpdatedAt: number | null, workspaceName: string, guardsJson: string): CopyBasis {
  return { listUpdatedAt, workspaceName, workspaceGuards: guardsJson }
}

/** A restored snapshot and when its encodings were polled (to carry on choosing them). */
export interface Restored {
  readonly snapshot: FeedSnapshot
  readonly polls: Map<string, number>
}

/**
 * The feed's copy as a snapshot that holds only its stored variants (`restored: true`), or null
 * when there is none or it must not be served (the reason logged).
 */
export async function restoreServedCopy (store: Store, ref: FeedRef, now: number, log: Pick<Logger, 'info'>): Promise<Restored | null> {
  const copy = await store.feedVersions.loadServed?.(ref) ?? null
  if (copy === null) return null
  const decoded = decodeMeta(copy.bytes)
  if (decoded === null || decoded.meta.workspaceId !== ref.workspaceId || decoded.meta.feedId !== ref.listId) return null
  const { meta, bodies } = decoded
  const why = await refusal(store, meta, now)
  if (why !== null) {
    log.info({ workspace: ref.workspaceId, feed: ref.listId, reason: why }, 'served copy not used')
    return null
  }
  const variants = new Map<string, Variant>()
  const polls = new Map<string, number>()
  await Promise.all(meta.variants.map(async (v) => {
    const version = versionOf(meta.feedId, v.key)
    if (version === null) return
    // Newer content was recorded since the save: this copy would move pollers back.
    const current = await store.feedVersions.get({ workspaceId: meta.workspaceId, ...version })
    if (current === null || Math.floor(current.since / 1000) * 1000 !== v.lastModified) return
    const gz = bodies.subarray(v.at, v.at + v.bytes)
    let identity: Uint8Array
    try {
      identity = await inflate(gz)
    } catch {
      return
    }
    if (identity.byteLength !== v.identity.length || gz.byteLength !== v.gzip.length) return
    variants.set(v.key, {
      status: v.status,
      contentType: v.contentType,
      identity: restoredRep(v.identity, toShared(identity)),
      gzip: restoredRep(v.gzip, toShared(gz)),
      entries: v.entries,
      limit: v.limit,
      lastModified: v.lastModified,
      lastModifiedHttp: v.lastModifiedHttp,
    })
    if (v.polled.identity > 0) polls.set(pollKey(v.key, false), v.polled.identity)
    if (v.polled.gzip > 0) polls.set(pollKey(v.key, true), v.polled.gzip)
  }))
  if (variants.size === 0) return null
  const none = { total: { v4: new Uint32Array(0), v6: new Uint32Array(0) }, groups: [] }
  return {
    snapshot: {
      workspaceId: meta.workspaceId,
      feedId: meta.feedId,
      name: meta.name,
      defaults: meta.defaults,
      limit: meta.limit,
      builtAt: meta.builtAt,
      expiresAt: meta.expiresAt ?? Infinity,
      shardCounts: meta.shardCounts,
      networks: meta.networks,
      variants,
      // No prefix arrays: explain and the answer formats wait for the build.
      published: { block: none, allow: none },
      restored: true,
    },
    polls,
  }
}

/**
 * Saves copies on publish within the bounds: one save in flight per feed (a newer publish
 * replaces a pending one), nothing written when the polled variants' tags did not change, and
 * the copies saved longest ago dropped when the total would pass its bound. The index of what is
 * stored is read once (start) and kept by this process's own saves; several nodes on one store
 * may each pass the total by up to one feed's bound until their next save (docs/operating.md).
 */
export class ServedCopies {
  readonly #store: Store
  readonly #bounds: ServedCopyBounds
  readonly #log: Pick<Logger, 'warn'>
  readonly #index = new Map<string, ServedCopyEntry>()
  readonly #tags = new Map<string, string>()
  readonly #pending = new Map<string, () => Promise<void>>()
  readonly #running = new Set<string>()
  #chain: Promise<void> = Promise.resolve()

  constructor (store: Store, bounds: ServedCopyBounds, log: Pick<Logger, 'warn'>) {
    this.#store = store
    this.#bounds = bounds
    this.#log = log
  }

  get enabled (): boolean {
    return this.#bounds.totalBytes > 0 && this.#store.feedVersions.saveServed !== undefined
  }

  /** What the store holds (at start); an unreadable list is an empty one. */
  async load (): Promise<ServedCopyEntry[]> {
    if (this.#store.feedVersions.listServed === undefined) return []
    const all = await this.#store.feedVersions.listServed()
    for (const e of all) this.#index.set(refKey(e), e)
    return all
  }

  /** A published snapshot: its copy saved (later, off this call). */
  published (snapshot: FeedSnapshot, basis: CopyBasis, polls: ReadonlyMap<string, number>, since: number): void {
    if (!this.enabled || snapshot.restored === true) return
    const ref = { workspaceId: snapshot.workspaceId, listId: snapshot.feedId }
    const key = refKey(ref)
    this.#pending.set(key, async () => {
      const limit = Math.min(this.#bounds.feedBytes, this.#bounds.totalBytes)
      const copy = encodeServedCopy(snapshot, basis, polls, since, limit)
      if (copy === null || this.#tags.get(key) === copy.tags) return
      await this.#makeRoom(key, copy.bytes.byteLength)
      const savedAt = Date.now()
      await this.#store.feedVersions.saveServed!(ref, { bytes: copy.bytes, savedAt })
      this.#index.set(key, { ...ref, bytes: copy.bytes.byteLength, savedAt })
      this.#tags.set(key, copy.tags)
    })
    this.#drain(key)
  }

  /** Resolves once every save asked for so far is done (tests, and a clean stop). */
  async flush (): Promise<void> {
    while (this.#pending.size > 0 || this.#running.size > 0) await this.#chain.catch(() => {})
  }

  #drain (key: string): void {
    if (this.#running.has(key)) return
    const save = this.#pending.get(key)
    if (save === undefined) return
    this.#pending.delete(key)
    this.#running.add(key)
    // One save at a time in all: each holds a feed's encoded bytes, and the store's writer is one.
    this.#chain = this.#chain.catch(() => {}).then(save).catch((e: unknown) => {
      this.#log.warn({ err: e, feed: key }, 'served copy not saved')
    }).finally(() => {
      this.#running.delete(key)
      this.#drain(key)
    })
  }

  /** Drops other feeds' copies, saved longest ago first, until `bytes` more fit in the total. */
  async #makeRoom (key: string, bytes: number): Promise<void> {
    let others = 0
    for (const [k, e] of this.#index) if (k !== key) others += e.bytes
    if (others + bytes <= this.#bounds.totalBytes) return
    const oldest = [...this.#index.entries()].filter(([k]) => k !== key).sort((a, b) => a[1].savedAt - b[1].savedAt)
    for (const [k, e] of oldest) {
      if (others + bytes <= this.#bounds.totalBytes) break
      await this.#store.feedVersions.saveServed!({ workspaceId: e.workspaceId, listId: e.listId }, null)
      this.#index.delete(k)
      this.#tags.delete(k)
      others -= e.bytes
    }
  }
}

function refKey (ref: FeedRef): string {
  return `${ref.workspaceId}\u0000${ref.listId}`
}
