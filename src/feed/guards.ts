/**
 * Publish guards (issue 21, README "Publish guards"): a build that a guard trips on is not
 * published; the feed keeps serving the last good rule set, re-evaluated at the current time.
 *
 *   candidate targets ─► compute ─┐
 *                                 ├─► per action: same content? publish. Else guards ─► trip? hold
 *   published rules at now ─► compute ─┘                                              │
 *                                                                                    ▼
 *                       one build of { tripped action: published targets, else candidate targets }
 *
 * Holding the published *rules* (not its bytes) is what keeps expiry exact: a held rule still
 * lapses at its expiry (SPEC 2.7), and a candidate that differs from the published rules at `now`
 * only by what lapsed is the same content, never held. Guards compare the candidate with the
 * published rules at `now`, so a mass expiry moves neither side of a shrink.
 *
 * Counted as the plain feed's networks per (list, action), both families together. A trip holds
 * both families, every format and shard of that action; the other action publishes on its own.
 * An accepted build (`threatfeed list accept`) is named by its digest, stored with the list, so
 * every node publishes that build and no other.
 */
import { createHash } from 'node:crypto'
import { NetworkSet } from '../net/network-set.js'
import { FEED_ACTIONS, type FeedAction, type GuardSettings, type PublishState } from '../store/types.js'
import type { GeoIndex } from '../geo/geo-index.js'
import type { ComputeResult, ComputeTask, TargetGroup } from '../pool/protocol.js'
import type { FeedTargets } from './build-snapshot.js'
import type { RuleTable } from './rule-table.js'
import type { FeedSnapshot, HeaderList, Representation, Variant } from './snapshot-types.js'

/**
 * A guard's name wherever it is named (X-Feed-Held, `held.guards`, messages): its admin API field;
 * the CLI flag is the same words in kebab-case (`--max-shrink-pct`).
 */
export type GuardName = 'min_entries' | 'max_shrink_pct' | 'max_grow_pct' | 'reject_special' | 'min_prefix_v4' | 'min_prefix_v6'

/** A guard name as stored before names were the admin API's fields (`max-shrink-pct`), as named now. */
export function guardNameOf (stored: string): string {
  return stored.replaceAll('-', '_')
}

/** The held guards per action, named as now (a held state read from the store may predate the names). */
export function heldGuardsOf (guards: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(guards).map(([action, g]) => [action, guardNameOf(g)]))
}

/** Networks shown in `list show` for each side of a held build's diff. */
const SAMPLE = 10

/** True when any guard is set (an accepted digest alone guards nothing). */
export function hasGuards (g: GuardSettings | undefined): g is GuardSettings {
  if (g === undefined) return false
  return g.minEntries !== undefined || g.maxShrinkPct !== undefined || g.maxGrowPct !== undefined ||
    g.rejectSpecial === true || g.minPrefixV4 !== undefined || g.minPrefixV6 !== undefined
}

/** What the guards judge of one action's build. */
export interface ActionFacts {
  /** Networks of the plain feed, v4 and v6 together. */
  readonly count: number
  /** Networks of the special space in it (0 when dropped). */
  readonly special: number
  /**
   * Shortest prefix length per family among the `ip` rule targets and the database records the
   * country and ASN targets expand from (Infinity when none): never the coalesced output, where a
   * country's blocks legitimately merge into wide prefixes.
   */
  readonly widest: { readonly v4: number, readonly v6: number }
}

/**
 * The first guard the candidate trips, judged against the published rules at the same instant
 * (null when nothing was published yet: the size-change guards then have nothing to compare).
 *
 * @example
 *   judge({ minEntries: 10 }, { count: 3, special: 0, widest: { v4: 32, v6: Infinity } }, null) // 'min_entries'
 */
export function judge (g: GuardSettings, candidate: ActionFacts, published: ActionFacts | null): GuardName | null {
  if (g.minEntries !== undefined && candidate.count < g.minEntries) return 'min_entries'
  if (published !== null && published.count > 0) {
    const change = (candidate.count - published.count) / published.count * 100
    if (g.maxShrinkPct !== undefined && -change > g.maxShrinkPct) return 'max_shrink_pct'
    if (g.maxGrowPct !== undefined && change > g.maxGrowPct) return 'max_grow_pct'
  }
  if (g.rejectSpecial === true && g.mode !== 'drop' && candidate.special > 0) return 'reject_special'
  if (g.minPrefixV4 !== undefined && candidate.widest.v4 < g.minPrefixV4) return 'min_prefix_v4'
  if (g.minPrefixV6 !== undefined && candidate.widest.v6 < g.minPrefixV6) return 'min_prefix_v6'
  return null
}

const CH_SLASH = 0x2f
const CH_COLON = 0x3a
const CH_NL = 0x0a

/** Shortest prefix length of the `ip` targets of some groups (`addr/len\n` lines), per family. */
export function widestTargets (groups: readonly TargetGroup[]): { v4: number, v6: number } {
  let v4 = Infinity
  let v6 = Infinity
  for (const g of groups) {
    // The text as a string, or as bytes in shared memory (rule-table.ts ipText).
    const s = g.ips
    const codeAt = typeof s === 'string' ? (i: number): number => s.charCodeAt(i) : (i: number): number => s[i]!
    let colon = false
    let len = -1
    for (let i = 0; i < s.length; i++) {
      const c = codeAt(i)
      if (c === CH_NL) {
        if (len >= 0) {
          if (colon) v6 = Math.min(v6, len)
          else v4 = Math.min(v4, len)
        }
        colon = false
        len = -1
      } else if (c === CH_COLON) {
        colon = true
      } else if (c === CH_SLASH) {
        len = 0
      } else if (len >= 0) {
        len = len * 10 + c - 48
      }
    }
  }
  return { v4, v6 }
}

/** A build's digest (what `list accept` names): its networks, both actions, every family. */
export function digestOf (r: ComputeResult): string {
  return createHash('sha256').update(r.block.hash.both).update('\0').update(r.allow.hash.both).digest('hex').slice(0, 32)
}

/** widestTargets, with the widest database record of each country and ASN target (GeoIndex#widestRecord). */
export function widestOf (groups: readonly TargetGroup[], geo: Pick<GeoIndex, 'widestRecord'> | undefined): { v4: number, v6: number } {
  const w = widestTargets(groups)
  if (geo === undefined) return w
  for (const g of groups) {
    for (const country of g.countries) {
      const r = geo.widestRecord({ country })
      w.v4 = Math.min(w.v4, r.v4)
      w.v6 = Math.min(w.v6, r.v6)
    }
    for (const asn of g.asns) {
      const r = geo.widestRecord({ asn })
      w.v4 = Math.min(w.v4, r.v4)
      w.v6 = Math.min(w.v6, r.v6)
    }
  }
  return w
}

function factsOf (r: ComputeResult, targets: FeedTargets, action: FeedAction, geo: Pick<GeoIndex, 'widestRecord'> | undefined): ActionFacts {
  const n = r[action].total
  return { count: n.v4.length / 2 + n.v6.length / 5, special: r.special?.[action] ?? 0, widest: widestOf(targets[action], geo) }
}

/** Networks added and removed between the published build and a held one, with counts and samples. */
export function diffOf (published: ComputeResult, held: ComputeResult, action: FeedAction): NonNullable<PublishState['held']>['diff'][FeedAction] {
  const a = NetworkSet.fromPacked(published[action].total)
  const b = NetworkSet.fromPacked(held[action].total)
  const lines = (s: NetworkSet): string[] => { const t = s.toLines(); return t === '' ? [] : t.slice(0, -1).split('\n') }
  const added = lines(b.subtract(a))
  const removed = lines(a.subtract(b))
  return {
    published: published[action].total.v4.length / 2 + published[action].total.v6.length / 5,
    held: held[action].total.v4.length / 2 + held[action].total.v6.length / 5,
    added: added.length,
    removed: removed.length,
    addedSample: added.slice(0, SAMPLE),
    removedSample: removed.slice(0, SAMPLE),
  }
}

/** A rule table of some rows of another: the published rules, kept while the live table moves on. */
export function freezeRows (t: RuleTable, rows: readonly Uint32Array[]): RuleTable {
  const set = new Set<number>()
  for (const r of rows) for (const i of r) set.add(i)
  const idx = Uint32Array.from(set).sort()
  const n = idx.length
  const pick8 = (a: Uint8Array): Uint8Array => { const o = new Uint8Array(n); idx.forEach((i, k) => { o[k] = a[i]! }); return o }
  const expiresAt = new Float64Array(n)
  const labels = new Uint32Array(n)
  const value: string[] = new Array<string>(n)
  idx.forEach((i, k) => { expiresAt[k] = t.expiresAt[i]!; labels[k] = t.labels[i]!; value[k] = t.value[i]! })
  return {
    length: n,
    type: pick8(t.type),
    allow: pick8(t.allow),
    value,
    expiresAt,
    labels,
    labelSets: t.labelSets.slice(),
    confidence: pick8(t.confidence),
    severity: pick8(t.severity),
    fingerprint: `published:${t.fingerprint}`,
  }
}

/** The variants of held actions, answered with `X-Feed-Held: <guard>`; the bodies are the same objects. */
export function markHeld (s: FeedSnapshot, held: Partial<Record<FeedAction, GuardName>>): FeedSnapshot {
  const variants = new Map<string, Variant>()
  for (const [key, v] of s.variants) {
    const guard = held[key.split('|')[2] as FeedAction]
    variants.set(key, guard === undefined ? v : { ...v, identity: withHeader(v.identity, guard), gzip: withHeader(v.gzip, guard) })
  }
  return { ...s, variants }
}

function withHeader (r: Representation, guard: string): Representation {
  const headers: HeaderList = [...r.headers, ['X-Feed-Held', guard]]
  return {
    get body () { return r.body },
    // Passed on, so that neither a 304 nor the hand-over to the front-end threads assembles a body.
    ...(r.length === undefined ? {} : { length: r.length }),
    etag: r.etag,
    headers,
    notModifiedHeaders: r.notModifiedHeaders,
  }
}

export interface GuardInputs {
  settings: GuardSettings
  now: number
  /** The candidate's targets, and the rows they come from frozen (taken under the rule table's lock). */
  candidate: { targets: FeedTargets, frozen: () => RuleTable }
  /** The published rules' targets at `now` (null when nothing was published yet). */
  publishedTargets: (table: RuleTable) => FeedTargets
  compute: (task: Omit<ComputeTask, 'geo'>) => Promise<ComputeResult>
  meta: string
  /** The action the feed answers without `action=` (the list's default, else block). */
  defaultAction: FeedAction
  /** The shard counts the build will ask for: the candidate's task is then the build's own. */
  shards: readonly number[]
  /** The geo index the expansions use: min-prefix judges their database records. */
  geo?: Pick<GeoIndex, 'widestRecord'>
}

/** What the compute tasks of a guarded feed do with the special space. */
export function specialMode (g: GuardSettings): 'detect' | 'drop' | undefined {
  return g.rejectSpecial === true ? (g.mode === 'drop' ? 'drop' : 'detect') : undefined
}

export interface GuardDecision {
  /** What to build: the candidate's targets, or per held action the published ones. */
  targets: FeedTargets | null
  held: Partial<Record<FeedAction, GuardName>>
  /** The state to record with the list when it changed (undefined: unchanged). */
  state: PublishState | undefined
}

/**
 * One feed's guard: the published rules and what is held. Lives with the feed in FeedService.
 */
export class FeedGuard {
  published: RuleTable | null = null
  state: PublishState = { held: null, publishedDigest: null }
  /** The stored record was read (guards-persist.ts): a restart judges against what was published. */
  restored = false

  /** Takes the published rules and state a store kept (null: none recorded). */
  restore (published: RuleTable | null, state: PublishState | null): void {
    this.restored = true
    this.published = published
    if (state !== null) this.state = state.held === null ? state : { ...state, held: { ...state.held, guards: heldGuardsOf(state.held.guards) } }
  }

  /** Decides what to publish; null targets means nothing may be served (a first build that trips). */
  async decide (io: GuardInputs): Promise<GuardDecision> {
    const special = specialMode(io.settings)
    const task = (t: FeedTargets): Omit<ComputeTask, 'geo'> => ({
      block: t.block, allow: t.allow, carve: t.carve, meta: io.meta,
      ...(io.shards.length > 0 ? { shards: [...io.shards] } : {}),
      ...(special !== undefined ? { special } : {}),
    })
    const cand = await io.compute(task(io.candidate.targets))
    const digest = digestOf(cand)
    const pubTargets = this.published === null ? null : io.publishedTargets(this.published)
    const pub = pubTargets === null ? null : await io.compute(task(pubTargets))
    const held: Partial<Record<FeedAction, GuardName>> = {}
    if (io.settings.accepted !== digest) {
      for (const action of FEED_ACTIONS) {
        // Only expiry between them: the same content, never held.
        if (pub !== null && pub[action].hash.both === cand[action].hash.both) continue
        const facts = factsOf(cand, io.candidate.targets, action, io.geo)
        const before = pub === null ? null : factsOf(pub, pubTargets!, action, io.geo)
        // An action empty before and after (a deny list's allow side) has nothing to guard, unless
        // it is the one the feed answers by default.
        if (facts.count === 0 && (before?.count ?? 0) === 0 && action !== io.defaultAction) continue
        const g = judge(io.settings, facts, before)
        if (g !== null) held[action] = g
      }
    }
    const trips = FEED_ACTIONS.filter((a) => held[a] !== undefined)
    if (trips.length === 0) {
      this.published = io.candidate.frozen()
      return { targets: io.candidate.targets, held, state: this.#record({ held: null, publishedDigest: digest }) }
    }
    const diff = pub === null ? null : Object.fromEntries(FEED_ACTIONS.map((a) => [a, diffOf(pub, cand, a)])) as NonNullable<PublishState['held']>['diff']
    const since = this.state.held?.digest === digest ? this.state.held.since : io.now
    const state = this.#record({ held: { digest, guards: held, since, diff: diff ?? emptyDiff(cand) }, publishedDigest: pub === null ? null : this.state.publishedDigest })
    if (pubTargets === null) return { targets: null, held, state }
    const c = io.candidate.targets
    const blockHeld = held.block !== undefined
    const targets: FeedTargets = {
      block: blockHeld ? pubTargets.block : c.block,
      allow: held.allow !== undefined ? pubTargets.allow : c.allow,
      // The carve shapes the deny feed alone: it goes with the block side's rules.
      carve: blockHeld ? pubTargets.carve : c.carve,
      expiresAt: Math.min(pubTargets.expiresAt, c.expiresAt),
    }
    return { targets, held, state }
  }

  /**
   * The guards were removed: nothing is held any more, and the next guarded build starts afresh.
   * Answers the new state when something was held (to record), else undefined.
   */
  reset (): PublishState | undefined {
    this.restored = true
    this.published = null
    return this.state.held === null ? undefined : this.#record({ held: null, publishedDigest: null })
  }

  /** The new state when it differs from the last one recorded, else undefined. */
  #record (next: PublishState): PublishState | undefined {
    const same = JSON.stringify(next) === JSON.stringify(this.state)
    this.state = next
    return same ? undefined : next
  }
}

function emptyDiff (cand: ComputeResult): NonNullable<PublishState['held']>['diff'] {
  const side = (a: FeedAction): NonNullable<PublishState['held']>['diff'][FeedAction] => {
    const n = cand[a].total.v4.length / 2 + cand[a].total.v6.length / 5
    return { published: 0, held: n, added: n, removed: 0, addedSample: NetworkSet.fromPacked(cand[a].total).toLines().split('\n').filter((l) => l !== '').slice(0, SAMPLE), removedSample: [] }
  }
  return { block: side('block'), allow: side('allow') }
}
