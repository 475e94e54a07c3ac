/**
 * Feed consumer tracking (issue 20): every authenticated feed request is counted for its consumer
 * on the HTTP thread, and the counts go to the store every few seconds.
 *
 *   poll ──► count(): six Map lookups ──► Tally (deltas since the last flush)
 *                       key id → address → User-Agent → client → list → variant
 *   every flushMs ──► dirty tallies as records ──► ConsumerStore#merge (one write)
 *   every evaluateMs ──► every record of the store (all processes' views merged)
 *                       ──► consumerStatus: stale / behind ──► log lines, /metrics gauges
 *
 * The cost of a poll in the steady state is the lookups and a few stores into a preallocated
 * object: the keys are strings the request already has (the key id, the list id, the variant key,
 * the memoised `client` parameter, the User-Agent header) or the IPv4 address as a number. The
 * write rate is one merge per flush whatever the poll rate, and merges add up, so several
 * processes on one store merge their views (consumer-record.ts).
 *
 * Bounds (issue 35, docs/consumers.md): a key has at most `perKey` consumers, in memory and in
 * the store; a new one past that evicts the key's least recently seen (each key's tallies are
 * threaded from most to least recently seen). Identifiers are cut (MAX_USER_AGENT) and a list
 * that does not exist is nobody's, so neither a header nor a path can make an entry large or
 * make one without a list behind it. What the bounds let go is counted (ConsumerDrops).
 */
import type { Logger } from '../log.js'
import { addDrops, consumerId, DEFAULT_CONSUMERS_PER_KEY, emptyTally, intervalBucket, INTERVAL_BUCKETS_MS, MAX_TRACKED_CONSUMERS, MAX_USER_AGENT, mergeConsumer, noDrops } from '../store/consumer-record.js'
import type { ConsumerDrops, FeedAction, FeedConsumer, Family, Store } from '../store/types.js'
import { CONSUMER_FORGET_MS, consumerStatus, currentVersions, versionId } from '../feed/consumer-status.js'
import { addressText, type AddressKey } from './consumer-address.js'
import type { ResolvedVariant } from './feed-params.js'

/** What a feed request knows of its consumer when it is answered (feed-routes.ts FeedRequest). */
export interface PollFacts {
  readonly workspaceId: string
  keyId: string
  readonly address: AddressKey
  readonly userAgent: string
  /** The `?client=` name; '' when absent or not parsed yet. */
  client: string
  /** The list id ('*': workspace feed); '' until the list resolved (not counted then). */
  listRef: string
  /** Null when the request failed before its variant was known. */
  readonly variant: ResolvedVariant | null
  /** When the request was served: the wall clock of its turn at the snapshot lookup (turn-clock.ts), its own near a lapse; 0 when it failed before. */
  at: number
}

/** A tally unseen this long is dropped from memory (its record stays in the store). */
const IDLE_MS = 2 * 86_400_000
const FORGET_EVERY_MS = 3_600_000

/** key id → address → User-Agent → client → list → variant key → Tally, below one key. */
type ByAddress = Map<AddressKey, Map<string, Map<string, Map<string, Map<string, Tally>>>>>

/**
 * One key's consumers: its part of the table and its tallies from most to least recently seen
 * (a list threaded through them), so the bound evicts the least recently seen in O(1).
 */
class KeyConsumers {
  readonly byAddress: ByAddress = new Map()
  size = 0
  newest: Tally | null = null
  oldest: Tally | null = null
  warned = false
}

class Tally {
  readonly identity: Omit<FeedConsumer, keyof ReturnType<typeof emptyTally>>
  readonly owner: KeyConsumers
  /** The maps holding it, from the key's byAddress down, and its key in each: to remove it. */
  readonly homes: ReadonlyArray<Map<unknown, unknown>>
  readonly names: readonly unknown[]
  newer: Tally | null = null
  older: Tally | null = null
  polls = 0
  ok = 0
  notModified = 0
  clientErrors = 0
  serverErrors = 0
  firstSeen = 0
  lastSeen = 0
  lastStatus = 0
  last200At = 0
  heldAt = 0
  heldEtag = ''
  heldSince = 0
  readonly fails = new Float64Array(3)
  failCount = 0
  /** Interval counts per bucket since the last flush; allocated on the second poll. */
  intervals: Uint32Array | null = null
  /** This process's previous poll of the consumer, kept across flushes (for intervals). */
  previousAt = 0
  /** The bucket of the last interval. */
  bucket = 0
  dirty = false
  /** Flushed at least once by this process: its key's bound in the store was checked. */
  flushed = false

  constructor (identity: Tally['identity'], owner: KeyConsumers, homes: Tally['homes'], names: Tally['names']) {
    this.identity = identity
    this.owner = owner
    this.homes = homes
    this.names = names
  }

  /** The deltas as a record to merge, and a clean slate. */
  take (): FeedConsumer {
    const t: FeedConsumer = {
      ...this.identity,
      ...emptyTally(this.firstSeen),
      polls: this.polls,
      ok: this.ok,
      notModified: this.notModified,
      clientErrors: this.clientErrors,
      serverErrors: this.serverErrors,
      lastSeen: this.lastSeen,
      last: { at: this.lastSeen, status: this.lastStatus },
      last200At: this.last200At === 0 ? null : this.last200At,
      held: this.heldAt === 0 ? null : { at: this.heldAt, etag: this.heldEtag, since: this.heldSince },
      recentFails: Array.from(this.fails.subarray(0, this.failCount)),
    }
    if (this.intervals !== null) {
      this.intervals.forEach((n, k) => { if (n > 0) t.intervals[k] = n })
      this.intervals.fill(0)
    }
    this.polls = this.ok = this.notModified = this.clientErrors = this.serverErrors = 0
    this.last200At = this.heldAt = this.failCount = 0
    this.dirty = false
    return t
  }
}

function child<K, V> (map: Map<K, V>, key: K, make: () => V): V {
  let v = map.get(key)
  if (v === undefined) {
    v = make()
    map.set(key, v)
  }
  return v
}

/** One function for every level (a closure per call would be an allocation per poll). */
const makeMap = (): Map<never, never> => new Map<never, never>()

/**
 * A User-Agent as a consumer is known by: at most MAX_USER_AGENT code units. A longer one is cut
 * (a slice for the lookup; the copy kept is made once per new consumer, see keptText).
 */
function agentOf (userAgent: string): string {
  return userAgent.length > MAX_USER_AGENT ? userAgent.slice(0, MAX_USER_AGENT) : userAgent
}

/**
 * A string that holds its own characters: V8 makes a slice of a long string a view that keeps
 * the whole original alive, which would pin every cut 4 KB User-Agent.
 */
function keptText (s: string): string {
  return s.length <= 12 ? s : Buffer.from(s, 'utf16le').toString('utf16le')
}

export interface ConsumerCounts {
  fresh: number
  stale: number
  behind: number
}

/**
 * What one flush hands on: the records, the drops per workspace, and the keys (key id →
 * workspace id) with a consumer new to the flushing process, whose bound in the store is checked
 * after the write. A front-end thread posts it to the main thread (ConsumerTracker#absorb).
 */
export interface ConsumerFlush {
  readonly records: readonly FeedConsumer[]
  readonly drops: ReadonlyMap<string, ConsumerDrops>
  readonly trim: ReadonlyMap<string, string>
  /** Consumers the flushing process tracks in memory. */
  readonly size: number
}

export interface ConsumerTrackerOptions {
  readonly store: Store
  readonly log: Logger
  /**
   * A front-end thread's tracker: each flush goes here instead of the store (which the thread
   * does not have), and the tracker evaluates nothing.
   */
  readonly handOver?: (flush: ConsumerFlush) => void
  /** THREATFEED_CONSUMER_STALE. */
  readonly staleMs: number
  /** THREATFEED_CONSUMERS_PER_KEY: most consumers one key has tracked, in memory and in the store. */
  readonly perKey?: number
  /** Most consumers tracked in memory, all keys together (tests lower it). */
  readonly total?: number
}

export class ConsumerTracker {
  readonly #store: Store
  readonly #log: Logger
  readonly #staleMs: number
  readonly #perKey: number
  readonly #total: number
  readonly #flushMs: number
  readonly #evaluateMs: number
  readonly #handOver: ((flush: ConsumerFlush) => void) | null
  #handedSize = 0
  /** Consumers each front-end thread tracks, as its last flush said (thread index → count). */
  readonly #threadSizes = new Map<number, number>()
  /** key id → its consumers. */
  readonly #keys = new Map<string, KeyConsumers>()
  #size = 0
  #full = false
  readonly #dirty = new Set<Tally>()
  /** Records a failed flush could not write: merged into the next one. */
  #unwritten = new Map<string, FeedConsumer>()
  /** Drops since the last flush, per workspace, and the keys whose store bound is to be checked. */
  #drops = new Map<string, ConsumerDrops>()
  #trim = new Map<string, string>()
  /** Drops by this process since it started (the /metrics counter). */
  readonly #dropped: ConsumerDrops = noDrops()
  /** Stale or not, per consumer id, as last evaluated (for the transition log lines). */
  readonly #stale = new Map<string, boolean>()
  #counts: ConsumerCounts = { fresh: 0, stale: 0, behind: 0 }
  #lastForget = -Infinity
  #flushTimer: NodeJS.Timeout | null = null
  #evaluateTimer: NodeJS.Timeout | null = null
  #flushing: Promise<void> = Promise.resolve()
  #evaluating: Promise<void> = Promise.resolve()

  constructor (opts: ConsumerTrackerOptions) {
    this.#store = opts.store
    this.#log = opts.log
    this.#staleMs = opts.staleMs
    this.#perKey = opts.perKey ?? DEFAULT_CONSUMERS_PER_KEY
    this.#total = opts.total ?? MAX_TRACKED_CONSUMERS
    this.#handOver = opts.handOver ?? null
    // A few seconds, or less when the stale threshold is short (tests): a consumer turns stale
    // within the threshold plus one evaluation.
    this.#flushMs = Math.min(5000, Math.max(100, Math.floor(opts.staleMs / 4)))
    this.#evaluateMs = Math.min(30_000, Math.max(250, Math.floor(opts.staleMs / 4)))
  }

  /**
   * Counts one answered request. `etag` and `since` are the representation's ETag and
   * Last-Modified (ms) on a 200 or 304, which the consumer then holds. A request for a list
   * that did not resolve (`listRef` '') is nobody's: a name that names nothing creates nothing.
   */
  count (p: PollFacts, status: number, etag: string | null, since: number): void {
    if (p.listRef === '') return
    const variantKey = p.variant === null ? '' : p.variant.key
    const userAgent = agentOf(p.userAgent)
    let k = this.#keys.get(p.keyId)
    let t = k === undefined ? undefined : k.byAddress.get(p.address)?.get(userAgent)?.get(p.client)?.get(p.listRef)?.get(variantKey)
    if (t === undefined) {
      k ??= child(this.#keys, p.keyId, () => new KeyConsumers())
      if (!this.#roomFor(k, p)) return
      t = this.#newTally(k, p, userAgent, variantKey)
    } else if (k!.newest !== t) {
      unlink(t)
      pushNewest(t.owner, t)
    }
    // The handler's own clock reading: a second Date.now() per poll measurably cost CPU.
    const now = p.at === 0 ? Date.now() : p.at
    if (t.previousAt > 0) {
      t.intervals ??= new Uint32Array(INTERVAL_BUCKETS_MS.length + 1)
      const ms = now - t.previousAt
      // A steady poller stays in its bucket: two comparisons instead of a logarithm.
      const b = t.bucket
      if (!(ms <= INTERVAL_BUCKETS_MS[b]! && (b === 0 || ms > INTERVAL_BUCKETS_MS[b - 1]!))) t.bucket = intervalBucket(ms)
      t.intervals[t.bucket]!++
    }
    t.previousAt = now
    if (!t.dirty) {
      t.dirty = true
      t.firstSeen = now
      this.#dirty.add(t)
    }
    t.polls++
    t.lastSeen = now
    t.lastStatus = status
    if (status === 304) t.notModified++
    else if (status === 200) {
      t.ok++
      t.last200At = now
    } else if (status >= 400) {
      if (status >= 500) t.serverErrors++
      else t.clientErrors++
      // The three latest failures, 4xx or 5xx (a feed held before it ever published answers only
      // 503: its pollers hold nothing), most recent first.
      t.fails[2] = t.fails[1]!
      t.fails[1] = t.fails[0]!
      t.fails[0] = now
      if (t.failCount < 3) t.failCount++
    }
    if (etag !== null && (status === 200 || status === 304)) {
      t.heldAt = now
      t.heldEtag = etag
      t.heldSince = since
    }
  }

  /**
   * Makes room for one more consumer of key `k`: at its bound, its least recently seen is
   * evicted; when the process tracks all it may, the key's own least recently seen makes room,
   * and a key with none is refused. False: refused.
   */
  #roomFor (k: KeyConsumers, p: PollFacts): boolean {
    if (k.size >= this.#perKey || (this.#size >= this.#total && k.size > 0)) {
      if (!k.warned) {
        k.warned = true
        this.#log.warn({ keyId: k.oldest!.identity.keyId, max: this.#perKey }, 'a feed key has more consumers than tracked per key; the least recently seen are dropped')
      }
      this.#remove(k.oldest!)
      this.#drop(p.workspaceId, 'evicted')
      return true
    }
    if (this.#size < this.#total) return true
    if (!this.#full) this.#log.warn({ max: this.#total }, 'too many feed consumers to track; new ones are not counted until idle ones are dropped')
    this.#full = true
    this.#drop(p.workspaceId, 'refused')
    if (k.size === 0) this.#keys.delete(p.keyId)
    return false
  }

  #drop (workspaceId: string, kind: keyof ConsumerDrops): void {
    this.#dropped[kind]++
    let d = this.#drops.get(workspaceId)
    if (d === undefined) this.#drops.set(workspaceId, d = noDrops())
    d[kind]++
  }

  #newTally (k: KeyConsumers, p: PollFacts, userAgent: string, variantKey: string): Tally {
    const agent = keptText(userAgent)
    const byAgent = child(k.byAddress, p.address, makeMap)
    const byClient = child(byAgent, agent, makeMap)
    const byList = child(byClient, p.client, makeMap)
    const byVariant = child(byList, p.listRef, makeMap)
    const params = p.variant?.params
    const identity = {
      workspaceId: p.workspaceId,
      keyId: p.keyId,
      address: addressText(p.address),
      userAgent: agent,
      client: p.client,
      listId: p.listRef,
      variant: variantKey,
      family: params?.family ?? 'both' as Family,
      action: params?.action ?? 'block' as FeedAction,
    }
    const homes = [k.byAddress, byAgent, byClient, byList, byVariant] as Array<Map<unknown, unknown>>
    const t = new Tally({ id: consumerId(identity), ...identity }, k, homes, [p.address, agent, p.client, p.listRef, variantKey])
    byVariant.set(variantKey, t)
    pushNewest(k, t)
    k.size++
    this.#size++
    return t
  }

  /** Removes a tally from the table, its emptied maps with it; its unflushed counts are lost. */
  #remove (t: Tally): void {
    const k = t.owner
    for (let i = t.homes.length - 1; i >= 0; i--) {
      const home = t.homes[i]!
      home.delete(t.names[i])
      if (home.size > 0) break
    }
    unlink(t)
    k.size--
    this.#size--
    if (t.dirty) this.#dirty.delete(t)
  }

  /** Fresh, stale and behind consumers as last evaluated (the /metrics gauges). */
  counts (): ConsumerCounts {
    return this.#counts
  }

  /** What this process's bounds let go since it started (the /metrics counter). */
  dropped (): Readonly<ConsumerDrops> {
    return this.#dropped
  }

  /** Consumers tracked in memory now, by this thread and the front-end threads that hand over to it. */
  get size (): number {
    let n = this.#size
    for (const k of this.#threadSizes.values()) n += k
    return n
  }

  /**
   * Takes a front-end thread's flush (its own tracker counts its polls: nothing crosses threads
   * per poll): written to the store in turn with this tracker's own flushes.
   */
  absorb (thread: number, flush: ConsumerFlush): void {
    this.#threadSizes.set(thread, flush.size)
    for (const d of flush.drops.values()) {
      this.#dropped.evicted += d.evicted
      this.#dropped.refused += d.refused
    }
    if (flush.records.length === 0 && flush.drops.size === 0 && flush.trim.size === 0) return
    const records = new Map<string, FeedConsumer>()
    for (const r of flush.records) records.set(r.id, r)
    this.#flushing = this.#flushing.then(() => this.#write(records, new Map(flush.drops), new Map(flush.trim)))
  }

  start (): void {
    this.#flushTimer = setInterval(() => { void this.flush() }, this.#flushMs)
    this.#flushTimer.unref()
    if (this.#handOver !== null) return
    this.#evaluateTimer = setInterval(() => { void this.evaluate() }, this.#evaluateMs)
    this.#evaluateTimer.unref()
    void this.evaluate()
  }

  /** Writes what was counted since the last flush; one at a time. */
  flush (): Promise<void> {
    this.#flushing = this.#flushing.then(() => this.#flush())
    return this.#flushing
  }

  async #flush (): Promise<void> {
    const records = this.#unwritten
    this.#unwritten = new Map()
    const drops = this.#drops
    this.#drops = new Map()
    const trim = this.#trim
    this.#trim = new Map()
    for (const t of this.#dirty) {
      const r = t.take()
      records.set(r.id, mergeConsumer(records.get(r.id) ?? null, r))
      if (!t.flushed) {
        t.flushed = true
        trim.set(t.identity.keyId, t.identity.workspaceId)
      }
    }
    this.#dirty.clear()
    if (this.#handOver !== null) {
      // No evaluation here: idle tallies go at the flush instead.
      const now = Date.now()
      if (now - this.#lastForget >= FORGET_EVERY_MS) {
        this.#lastForget = now
        this.#dropIdle(now)
      }
      if (records.size === 0 && drops.size === 0 && trim.size === 0 && this.#size === this.#handedSize) return
      this.#handedSize = this.#size
      this.#handOver({ records: [...records.values()], drops, trim, size: this.#size })
      return
    }
    await this.#write(records, drops, trim)
  }

  /** Merges a flush into the store, then trims the keys that gained a consumer to their bound. */
  async #write (records: Map<string, FeedConsumer>, drops: Map<string, ConsumerDrops>, trim: Map<string, string>): Promise<void> {
    if (records.size === 0 && drops.size === 0 && trim.size === 0) return
    try {
      await this.#store.consumers.merge([...records.values()], drops)
    } catch (e) {
      this.#log.warn({ err: e, consumers: records.size }, 'feed consumer counts not written; retrying at the next flush')
      for (const [id, r] of records) this.#unwritten.set(id, mergeConsumer(this.#unwritten.get(id) ?? null, r))
      for (const [ws, d] of drops) this.#drops.set(ws, addDrops(this.#drops.get(ws) ?? noDrops(), d))
      for (const [keyId, ws] of trim) this.#trim.set(keyId, ws)
      return
    }
    // A key with a consumer new to this process may have passed its bound in the store (other
    // processes, earlier runs): its least recently seen records go.
    for (const [keyId, ws] of trim) {
      try {
        this.#dropped.removed += await this.#store.consumers.trim(ws, keyId, this.#perKey)
      } catch (e) {
        this.#log.warn({ err: e, keyId }, 'feed consumers of a key not trimmed to the bound; trying at the next flush')
        this.#trim.set(keyId, ws)
      }
    }
  }

  /** Reads every consumer from the store and updates stale/behind, logging transitions. */
  evaluate (): Promise<void> {
    this.#evaluating = this.#evaluating.then(() => this.#evaluate()).catch((e: unknown) => {
      this.#log.warn({ err: e }, 'feed consumers not evaluated; trying again at the next interval')
    })
    return this.#evaluating
  }

  async #evaluate (): Promise<void> {
    const now = Date.now()
    if (now - this.#lastForget >= FORGET_EVERY_MS) {
      this.#lastForget = now
      const forgotten = await this.#store.consumers.forget(now - CONSUMER_FORGET_MS)
      if (forgotten > 0) this.#log.info({ consumers: forgotten }, 'forgot feed consumers unseen for 30 days')
      this.#dropIdle(now)
    }
    const consumers = await this.#store.consumers.list()
    const versions = await currentVersions(this.#store, consumers)
    const counts: ConsumerCounts = { fresh: 0, stale: 0, behind: 0 }
    const seen = new Set<string>()
    for (const c of consumers) {
      seen.add(c.id)
      const s = consumerStatus(c, versions.get(versionId(c)) ?? null, now, this.#staleMs)
      if (s.stale) counts.stale++
      else counts.fresh++
      if (s.behind?.behind === true) counts.behind++
      const was = this.#stale.get(c.id)
      if (s.stale && was !== true) {
        this.#log.warn({ consumer: describe(c), reason: s.reason, lastSeen: new Date(c.lastSeen).toISOString(), lastStatus: c.last.status, staleAfterMs: s.staleAfterMs }, 'feed consumer is stale')
      } else if (!s.stale && was === true) {
        this.#log.info({ consumer: describe(c), lastStatus: c.last.status }, 'feed consumer recovered')
      }
      this.#stale.set(c.id, s.stale)
    }
    for (const id of this.#stale.keys()) if (!seen.has(id)) this.#stale.delete(id)
    this.#counts = counts
  }

  /** Drops tallies of consumers this process has not seen for a while, and their empty maps. */
  #dropIdle (now: number): void {
    for (const [keyId, k] of this.#keys) {
      while (k.oldest !== null && !k.oldest.dirty && now - k.oldest.previousAt > IDLE_MS) this.#remove(k.oldest)
      if (k.size === 0) this.#keys.delete(keyId)
    }
    this.#full = this.#size >= this.#total
  }

  /** Stops the timers and writes what is left. */
  async stop (): Promise<void> {
    if (this.#flushTimer !== null) clearInterval(this.#flushTimer)
    if (this.#evaluateTimer !== null) clearInterval(this.#evaluateTimer)
    this.#flushTimer = this.#evaluateTimer = null
    await this.#evaluating
    await this.flush()
  }
}

/** Takes a tally out of its key's recency list. */
function unlink (t: Tally): void {
  const k = t.owner
  if (t.newer === null) k.newest = t.older
  else t.newer.older = t.older
  if (t.older === null) k.oldest = t.newer
  else t.older.newer = t.newer
  t.newer = t.older = null
}

/** Puts a tally first in its key's recency list. */
function pushNewest (k: KeyConsumers, t: Tally): void {
  t.older = k.newest
  t.newer = null
  if (k.newest !== null) k.newest.newer = t
  k.newest = t
  k.oldest ??= t
}

/** A consumer as a log line shows it. */
function describe (c: FeedConsumer): Record<string, string> {
  // `keyId`, not `key`: the logger redacts every field named key (src/log.ts).
  const d: Record<string, string> = { workspace: c.workspaceId, keyId: c.keyId, address: c.address, userAgent: c.userAgent, list: c.listId, variant: c.variant }
  if (c.client !== '') d.client = c.client
  return d
}
