/**
 * The version history behind feed deltas (`?since=`, docs/deltas.md) — and, later, the bouncer
 * cursors of the CrowdSec API: one mechanism answering "what was removed and added between
 * version A and now" for one feed and action.
 *
 *   swap ──► record(snapshot) ──► per feed, per action:
 *              versions  [v0]──diff──►[v1]──diff──►…──►[vn = what is served]
 *              tags      ETag (unquoted) ──► version seq     (every plain and nftables tag, shards too)
 *
 * A version is the set of published networks of one action (coalesced, carved: snapshot.published),
 * both families. What is kept per version is only its diff from the one before (the networks it
 * removed and added), not the set: the current set is the snapshot's own. The change from vk to vn
 * is composed from the diffs after vk: a prefix whose first touch after vk is a removal was in vk,
 * one whose last touch is an addition is in vn — so the answer is exactly the set difference of
 * the two versions' contents, whatever builds this node saw in between, and the same on every node
 * that has vk (a node that has not, restarted or new, answers full).
 *
 * A tag names content on every node: it is the variant followed by a digest of the body, and a
 * plain or nftables body is a function of the networks alone. A shard's tag names the whole feed's
 * version it was built with (a shard is the whole set filtered by shardOf, a function of each
 * network alone, so the caller filters the change the same way).
 *
 * Bound, per feed and action: at most `versions` bases, none superseded longer than `maxAgeMs`
 * ago, and diffs holding at most max(networks of the current version, MIN_DIFF_BUDGET) prefixes
 * in all (8 bytes each for IPv4, 20 for IPv6) — a delta across more would not be smaller than the
 * full feed anyway. Plus the tags: ≤ 10 per version and unit (feed or shard).
 */
import type { FeedAction } from '../store/types.js'
import { FEED_ACTIONS } from '../store/types.js'
import type { FeedId, FeedSnapshot, PublishedPrefixes } from './snapshot-types.js'

/** Diff prefixes a feed's action may keep even when its current set is smaller. */
export const MIN_DIFF_BUDGET = 1024

/** Formats whose tags name a version (their bodies are a function of the networks alone). */
const VERSIONED_FORMATS = new Set(['plain', 'nftables'])

export interface HistoryOptions {
  /** Bases kept per feed and action (THREATFEED_DELTA_HISTORY); 0 keeps none. */
  readonly versions: number
  /** A base superseded longer ago than this is dropped (THREATFEED_DELTA_MAX_AGE). */
  readonly maxAgeMs: number
}

/** The networks removed from and added to a feed's action between two versions, each sorted in feed order. */
export interface FeedChanges {
  readonly removed: PublishedPrefixes
  readonly added: PublishedPrefixes
}

interface Version {
  readonly seq: number
  /** When it stopped being current (Infinity while it is). */
  supersededAt: number
  /** From the version before: null for the first one kept. */
  readonly diff: FeedChanges | null
  readonly size: number
  readonly tags: string[]
}

class ActionHistory {
  readonly versions: Version[] = []
  readonly tags = new Map<string, number>()
  current: PublishedPrefixes | null = null
  nextSeq = 0
  diffSize = 0
}

interface FeedHistory {
  readonly actions: Record<FeedAction, ActionHistory>
}

const EMPTY_PREFIXES: PublishedPrefixes = { v4: new Uint32Array(0), v6: new Uint32Array(0) }

/**
 * Per feed, the versions a delta can start from. Fed by the feed service's swaps (main thread).
 *
 * @example
 *   const history = new DeltaHistory({ versions: 32, maxAgeMs: 86_400_000 })
 *   feeds.onSwap((ws, feedId, snapshot) => { history.record(ws, feedId, snapshot, Date.now()) })
 *   history.changes(ws, '*', 'block', 'plain.v4.block.identity.q1w2…', Date.now()) // { removed, added } or null
 */
export class DeltaHistory {
  readonly #options: HistoryOptions
  readonly #feeds = new Map<string, FeedHistory>()

  constructor (options: HistoryOptions) {
    this.#options = options
  }

  /** Records the snapshot now served for a feed (null: the feed was dropped, and so is its history). */
  record (workspaceId: string, feedId: FeedId, snapshot: FeedSnapshot | null, now: number): void {
    const key = feedKey(workspaceId, feedId)
    if (snapshot === null || this.#options.versions === 0) {
      this.#feeds.delete(key)
      return
    }
    let feed = this.#feeds.get(key)
    if (feed === undefined) {
      feed = { actions: { block: new ActionHistory(), allow: new ActionHistory() } }
      this.#feeds.set(key, feed)
    }
    const tags = tagsOf(snapshot)
    for (const action of FEED_ACTIONS) this.#recordAction(feed.actions[action], snapshot.published[action].total, tags[action], now)
  }

  /**
   * What changed in a feed's action from the version `tag` names (unquoted) to the current one;
   * null when this node does not hold that version (unknown, dropped, or too old). An empty
   * change when it is the current version.
   */
  changes (workspaceId: string, feedId: FeedId, action: FeedAction, tag: string, now: number): FeedChanges | null {
    const h = this.#feeds.get(feedKey(workspaceId, feedId))?.actions[action]
    if (h === undefined) return null
    this.#prune(h, now)
    const seq = h.tags.get(tag)
    if (seq === undefined) return null
    const first = h.versions[0]!.seq
    return compose(h.versions.slice(seq - first + 1))
  }

  /**
   * The change from the version `behind` versions before the current one (1: the one before),
   * with that base's tags (unquoted); null when this node holds no such version.
   */
  recent (workspaceId: string, feedId: FeedId, action: FeedAction, behind: number, now: number): { changes: FeedChanges, tags: readonly string[] } | null {
    const h = this.#feeds.get(feedKey(workspaceId, feedId))?.actions[action]
    if (h === undefined || behind < 1) return null
    this.#prune(h, now)
    const at = h.versions.length - 1 - behind
    if (at < 0) return null
    return { changes: compose(h.versions.slice(at + 1)), tags: h.versions[at]!.tags }
  }

  /** Versions and diff prefixes held for a feed's action (for tests and the bench). */
  size (workspaceId: string, feedId: FeedId, action: FeedAction): { versions: number, prefixes: number, tags: number } {
    const h = this.#feeds.get(feedKey(workspaceId, feedId))?.actions[action]
    return h === undefined ? { versions: 0, prefixes: 0, tags: 0 } : { versions: h.versions.length, prefixes: h.diffSize, tags: h.tags.size }
  }

  #recordAction (h: ActionHistory, set: PublishedPrefixes, tags: string[], now: number): void {
    const latest = h.versions[h.versions.length - 1]
    if (latest !== undefined && h.current !== null) {
      const diff = diffPrefixes(h.current, set)
      const size = countOf(diff.removed) + countOf(diff.added)
      if (size === 0) {
        // Same networks (a rebuild, a new shard count): the tags join the current version.
        for (const tag of tags) this.#tag(h, latest, tag)
        h.current = set
        return
      }
      latest.supersededAt = now
      const version: Version = { seq: h.nextSeq++, supersededAt: Infinity, diff, size, tags: [] }
      h.versions.push(version)
      h.diffSize += size
      for (const tag of tags) this.#tag(h, version, tag)
    } else {
      const version: Version = { seq: h.nextSeq++, supersededAt: Infinity, diff: null, size: 0, tags: [] }
      h.versions.push(version)
      for (const tag of tags) this.#tag(h, version, tag)
    }
    h.current = set
    this.#prune(h, now)
  }

  #tag (h: ActionHistory, version: Version, tag: string): void {
    if (h.tags.get(tag) === version.seq) return
    h.tags.set(tag, version.seq)
    version.tags.push(tag)
  }

  /** Drops the oldest bases past the count, the age or the diff budget. The current version stays. */
  #prune (h: ActionHistory, now: number): void {
    const budget = Math.max(MIN_DIFF_BUDGET, h.current === null ? 0 : countOf(h.current))
    const oldest = now - this.#options.maxAgeMs
    while (h.versions.length > 1) {
      const base = h.versions[0]!
      const tooMany = h.versions.length - 1 > this.#options.versions
      if (!tooMany && base.supersededAt >= oldest && h.diffSize <= budget) break
      h.versions.shift()
      for (const tag of base.tags) if (h.tags.get(tag) === base.seq) h.tags.delete(tag)
      // The next version becomes the first base: its diff is not needed any more.
      const next = h.versions[0]!
      h.diffSize -= next.size
      h.versions[0] = { seq: next.seq, supersededAt: next.supersededAt, diff: null, size: 0, tags: next.tags }
    }
  }
}

function feedKey (workspaceId: string, feedId: FeedId): string {
  return `${workspaceId}\n${feedId}`
}

function countOf (p: PublishedPrefixes): number {
  return (p.v4.length >> 1) + p.v6.length / 5
}

/** The unquoted tags of every plain and nftables representation of a snapshot, per action. */
function tagsOf (snapshot: FeedSnapshot): Record<FeedAction, string[]> {
  const out: Record<FeedAction, string[]> = { block: [], allow: [] }
  for (const [key, variant] of snapshot.variants) {
    if (variant.status !== 200) continue
    const [format, , action, checksum] = key.split('|')
    if (!VERSIONED_FORMATS.has(format!) || checksum !== '') continue
    const list = out[action as FeedAction]
    list.push(unquote(variant.identity.etag), unquote(variant.gzip.etag))
  }
  return out
}

function unquote (etag: string): string {
  return etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"') ? etag.slice(1, -1) : etag
}

/** Lexicographic order of the prefixes at a[i..i+w) and b[j..j+w) (address words, then length). */
function compareAt (a: Uint32Array, i: number, b: Uint32Array, j: number, w: number): number {
  for (let k = 0; k < w; k++) {
    const d = a[i + k]! - b[j + k]!
    if (d !== 0) return d
  }
  return 0
}

/** Prefixes of `a` not in `b` and of `b` not in `a`, in order: one merge walk over two sorted arrays. */
function diffFamily (a: Uint32Array, b: Uint32Array, w: number): { removed: Uint32Array, added: Uint32Array } {
  if (a === b) return { removed: EMPTY_PREFIXES.v4, added: EMPTY_PREFIXES.v4 }
  const removed: number[] = []
  const added: number[] = []
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    const c = compareAt(a, i, b, j, w)
    if (c === 0) {
      i += w
      j += w
    } else if (c < 0) {
      for (let k = 0; k < w; k++) removed.push(a[i + k]!)
      i += w
    } else {
      for (let k = 0; k < w; k++) added.push(b[j + k]!)
      j += w
    }
  }
  for (; i < a.length; i++) removed.push(a[i]!)
  for (; j < b.length; j++) added.push(b[j]!)
  return { removed: Uint32Array.from(removed), added: Uint32Array.from(added) }
}

/**
 * The networks of `to` not in `from` (added) and of `from` not in `to` (removed), per family.
 *
 * @example
 *   diffPrefixes({ v4: new Uint32Array([0x0a000000, 25, 0x0a000080, 25]), v6 }, { v4: new Uint32Array([0x0a000000, 24]), v6 })
 *   // removed: the two /25s, added: the /24
 */
export function diffPrefixes (from: PublishedPrefixes, to: PublishedPrefixes): FeedChanges {
  const v4 = diffFamily(from.v4, to.v4, 2)
  const v6 = diffFamily(from.v6, to.v6, 5)
  return { removed: { v4: v4.removed, v6: v6.removed }, added: { v4: v4.added, v6: v6.added } }
}

/** A prefix's first and last operation across the diffs (true: added), and where its words are. */
interface Touch { readonly first: boolean, last: boolean, readonly words: Uint32Array, readonly at: number }

/**
 * The change across consecutive diffs: a prefix was in the base when its first touch removed it,
 * and is in the result when its last touch added it; removed = in base and not in result, added
 * = the reverse.
 */
function compose (diffs: readonly Version[]): FeedChanges {
  if (diffs.length === 0) return { removed: EMPTY_PREFIXES, added: EMPTY_PREFIXES }
  if (diffs.length === 1) return diffs[0]!.diff!
  const v4 = composeFamily(diffs, 'v4', 2)
  const v6 = composeFamily(diffs, 'v6', 5)
  return { removed: { v4: v4.removed, v6: v6.removed }, added: { v4: v4.added, v6: v6.added } }
}

function composeFamily (diffs: readonly Version[], family: 'v4' | 'v6', w: number): { removed: Uint32Array, added: Uint32Array } {
  const touches = new Map<string, Touch>()
  const touch = (words: Uint32Array, at: number, add: boolean): void => {
    const key = words.subarray(at, at + w).join(',')
    const t = touches.get(key)
    if (t === undefined) touches.set(key, { first: add, last: add, words, at })
    else t.last = add
  }
  for (const v of diffs) {
    const d = v.diff!
    for (let i = 0; i < d.removed[family].length; i += w) touch(d.removed[family], i, false)
    for (let i = 0; i < d.added[family].length; i += w) touch(d.added[family], i, true)
  }
  const removed: Touch[] = []
  const added: Touch[] = []
  for (const t of touches.values()) {
    if (!t.first && !t.last) removed.push(t)
    else if (t.first && t.last) added.push(t)
  }
  return { removed: pack(removed, w), added: pack(added, w) }
}

function pack (touches: Touch[], w: number): Uint32Array {
  touches.sort((x, y) => compareAt(x.words, x.at, y.words, y.at, w))
  const out = new Uint32Array(touches.length * w)
  touches.forEach((t, n) => { out.set(t.words.subarray(t.at, t.at + w), n * w) })
  return out
}
