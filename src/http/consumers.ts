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
 */
import type { Logger } from '../log.js'
import { consumerId, emptyTally, intervalBucket, INTERVAL_BUCKETS_MS, mergeConsumer, MAX_USER_AGENT } from '../store/consumer-record.js'
import type { FeedAction, FeedConsumer, Family, Store } from '../store/types.js'
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
  /** The list id ('*': workspace feed), or the reference as requested when it did not resolve. */
  listRef: string
  /** Null when the request failed before its variant was known. */
  readonly variant: ResolvedVariant | null
  /** When the request was served: the wall clock of its turn at the snapshot lookup (turn-clock.ts), its own near a lapse; 0 when it failed before. */
  at: number
}

/** Tallies kept in memory at most; a fleet is far smaller, a key cycling User-Agents is not. */
const MAX_TALLIES = 100_000
/** A tally unseen this long is dropped from memory (its record stays in the store). */
const IDLE_MS = 2 * 86_400_000
const FORGET_EVERY_MS = 3_600_000

class Tally {
  readonly identity: Omit<FeedConsumer, keyof ReturnType<typeof emptyTally>>
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

  constructor (identity: Tally['identity']) {
    this.identity = identity
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

type Level<K, V> = Map<K, V>
/** key id → address → User-Agent → client → list → variant key → Tally */
type Table = Level<string, Level<AddressKey, Level<string, Level<string, Level<string, Level<string, Tally>>>>>>

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

export interface ConsumerCounts {
  fresh: number
  stale: number
  behind: number
}

export interface ConsumerTrackerOptions {
  readonly store: Store
  readonly log: Logger
  /** THREATFEED_CONSUMER_STALE. */
  readonly staleMs: number
}

export class ConsumerTracker {
  readonly #store: Store
  readonly #log: Logger
  readonly #staleMs: number
  readonly #flushMs: number
  readonly #evaluateMs: number
  readonly #table: Table = new Map()
  #size = 0
  #full = false
  readonly #dirty: Tally[] = []
  /** Records a failed flush could not write: merged into the next one. */
  #unwritten = new Map<string, FeedConsumer>()
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
    // A few seconds, or less when the stale threshold is short (tests): a consumer turns stale
    // within the threshold plus one evaluation.
    this.#flushMs = Math.min(5000, Math.max(100, Math.floor(opts.staleMs / 4)))
    this.#evaluateMs = Math.min(30_000, Math.max(250, Math.floor(opts.staleMs / 4)))
  }

  /**
   * Counts one answered request. `etag` and `since` are the representation's ETag and
   * Last-Modified (ms) on a 200 or 304, which the consumer then holds.
   */
  count (p: PollFacts, status: number, etag: string | null, since: number): void {
    const variantKey = p.variant === null ? '' : p.variant.key
    const byAddress = child(this.#table, p.keyId, makeMap)
    const byAgent = child(byAddress, p.address, makeMap)
    const byClient = child(byAgent, p.userAgent, makeMap)
    const byList = child(byClient, p.client, makeMap)
    const byVariant = child(byList, p.listRef, makeMap)
    let t = byVariant.get(variantKey)
    if (t === undefined) {
      if (this.#size >= MAX_TALLIES) {
        if (!this.#full) this.#log.warn({ max: MAX_TALLIES }, 'too many feed consumers to track; new ones are not counted until idle ones are dropped')
        this.#full = true
        return
      }
      t = this.#newTally(p, variantKey)
      byVariant.set(variantKey, t)
      this.#size++
    }
    // The handler's own clock reading: a second Date.now() per poll measurably cost CPU.
    const now = p.at === 0 ? Date.now() : p.at
    if (t.previousAt > 0) {
      t.intervals ??= new Uint32Array(INTERVAL_BUCKETS_MS.length + 1)
      const ms = now - t.previousAt
      // A steady poller stays in its bucket: two comparisons instead of a logarithm.
      const k = t.bucket
      if (!(ms <= INTERVAL_BUCKETS_MS[k]! && (k === 0 || ms > INTERVAL_BUCKETS_MS[k - 1]!))) t.bucket = intervalBucket(ms)
      t.intervals[t.bucket]!++
    }
    t.previousAt = now
    if (!t.dirty) {
      t.dirty = true
      t.firstSeen = now
      this.#dirty.push(t)
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

  #newTally (p: PollFacts, variantKey: string): Tally {
    const params = p.variant?.params
    const identity = {
      workspaceId: p.workspaceId,
      keyId: p.keyId,
      address: addressText(p.address),
      userAgent: p.userAgent.slice(0, MAX_USER_AGENT),
      client: p.client,
      listId: p.listRef,
      variant: variantKey,
      family: params?.family ?? 'both' as Family,
      action: params?.action ?? 'block' as FeedAction,
    }
    return new Tally({ id: consumerId(identity), ...identity })
  }

  /** Fresh, stale and behind consumers as last evaluated (the /metrics gauges). */
  counts (): ConsumerCounts {
    return this.#counts
  }

  start (): void {
    this.#flushTimer = setInterval(() => { void this.flush() }, this.#flushMs)
    this.#evaluateTimer = setInterval(() => { void this.evaluate() }, this.#evaluateMs)
    this.#flushTimer.unref()
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
    for (const t of this.#dirty.splice(0)) {
      const r = t.take()
      records.set(r.id, mergeConsumer(records.get(r.id) ?? null, r))
    }
    if (records.size === 0) return
    try {
      await this.#store.consumers.merge([...records.values()])
    } catch (e) {
      this.#log.warn({ err: e, consumers: records.size }, 'feed consumer counts not written; retrying at the next flush')
      for (const [id, r] of records) this.#unwritten.set(id, mergeConsumer(this.#unwritten.get(id) ?? null, r))
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
    const prune = (map: Map<unknown, unknown>): void => {
      for (const [k, v] of map) {
        if (v instanceof Tally) {
          if (!v.dirty && now - v.previousAt > IDLE_MS) {
            map.delete(k)
            this.#size--
          }
        } else {
          prune(v as Map<unknown, unknown>)
          if ((v as Map<unknown, unknown>).size === 0) map.delete(k)
        }
      }
    }
    prune(this.#table as Map<unknown, unknown>)
    this.#full = this.#size >= MAX_TALLIES
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

/** A consumer as a log line shows it. */
function describe (c: FeedConsumer): Record<string, string> {
  // `keyId`, not `key`: the logger redacts every field named key (src/log.ts).
  const d: Record<string, string> = { workspace: c.workspaceId, keyId: c.keyId, address: c.address, userAgent: c.userAgent, list: c.listId, variant: c.variant }
  if (c.client !== '') d.client = c.client
  return d
}
