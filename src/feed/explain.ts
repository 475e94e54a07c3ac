/**
 * Explain one address (GET /v1/threat/explain, `threatfeed explain`): for the workspace feed and
 * each list, and for each action, whether the address is published, the network of each format
 * that holds it, the rules that put it there, and — when it is not published — why.
 *
 *   address ─► covering targets: its 25/117 networks ≥ the ingest floor, its country, its ASN
 *           ─► store: the access rules of those targets (lapsed too) and their tombstones
 *           ─► per feed and action: snapshot.published lookup (explain-lookup.ts) + the rules
 *
 * Nothing is rebuilt: "published" comes from the current snapshot's own networks, and the rules
 * from the store's target index, so an explanation costs a few point reads and one binary search
 * per (feed, action, array). A rule may have changed since the snapshot was built; the reason
 * `changed_since_build` says so rather than contradict the body. A feed with no current snapshot
 * (nobody polled it lately) is not built for an explanation of every feed: it says `not_built`,
 * with the rules that would put the address in it and the reasons the rules alone give.
 */
import type { AccessList, AccessRule, FeedAction, FeedFormat, Family, LapsedTombstone, PublishState, RuleStore, Target } from '../store/types.js'
import { CONFIDENCES, FEED_ACTIONS, FORMATS, SEVERITIES } from '../store/types.js'
import { coveringNetworks, lookupPublished, type ExplainAddress, type PublishedRow } from './explain-lookup.js'
import { geoMatchOf, type ExplainGeo, type GeoMatch } from './explain-geo.js'
import { heldGuardsOf } from './guards.js'
import { matchesSelector } from './rule-table.js'
import { variantKey, WORKSPACE_FEED, type FeedId, type FeedSnapshot } from './snapshot-types.js'

/**
 * A publish guard holding a feed's new content back (issue #21, FeedService#holdOf): the
 * explanation carries it as `held`, since what it says is published is the last good build.
 */
export interface FeedHold {
  readonly reason: string
  /** ISO 8601 time the hold started. */
  readonly since: string
  /** The guard tripped, per held action (an action not named publishes its new builds). */
  readonly guards: Readonly<Partial<Record<FeedAction, string>>>
  /** The held build's digest: what `list accept` and POST …/accept take. */
  readonly digest: string
}

/** What explain (HTTP and CLI) and `feed get` say of a held build. */
export function feedHoldOf (held: NonNullable<PublishState['held']>): FeedHold {
  const named = heldGuardsOf(held.guards)
  const guards = Object.entries(named).map(([action, guard]) => `${action}: ${guard}`).join(', ')
  return { reason: `held by a publish guard (${guards}); threatfeed list accept publishes build ${held.digest}`, since: new Date(held.since).toISOString(), guards: named, digest: held.digest }
}

export interface ExplainSources {
  readonly rules: Pick<RuleStore, 'accessRulesOfTargets' | 'lapsedTombstones'>
  readonly geo: ExplainGeo
  /**
   * The feed's current snapshot (the server's, or one built in-process by the CLI); null when it
   * has none and is not to be built for this (reason `not_built`).
   */
  snapshotOf (list: AccessList | null): Promise<FeedSnapshot | null>
  /** Publish guards' holds (see FeedHold). */
  readonly heldBy?: (workspaceId: string, feedId: FeedId) => FeedHold | undefined
}

export interface ExplainedRule {
  readonly id: string
  readonly kind: 'access_rule'
  readonly target: Target
  readonly rule_ref: string | null
  readonly action: 'block' | 'allow'
  readonly name: string | null
  readonly reason: string | null
  readonly labels: AccessRule['labels']
  /** The rule's own (its field, else its label); null when it has none and takes the list's. */
  readonly confidence: string | null
  readonly severity: string | null
  readonly created_at: string
  readonly updated_at: string
  readonly expires_at: string | null
  /** Stream position of the signal that last changed the rule. */
  readonly stream_seq: number
  /** For a country or ASN rule: the database record that puts the address in it. */
  readonly expansion?: Readonly<Record<string, string | null>>
}

export interface LapsedEntry {
  readonly target: Target | null
  readonly rule_ref: string | null
  readonly lapsed_at: string
  /** True when the sweep removed the rule and only its tombstone is left. */
  readonly swept: boolean
  /** The rule itself, while the sweep has not removed it yet. */
  readonly rule?: ExplainedRule
}

export type ExplainReason =
  | { readonly code: 'no_rule', readonly message: string }
  | { readonly code: 'lapsed', readonly message: string, readonly lapsed: readonly LapsedEntry[] }
  | { readonly code: 'carved', readonly message: string, readonly by: readonly ExplainedRule[] }
  | { readonly code: 'not_selected', readonly message: string, readonly rules: ReadonlyArray<{ readonly rule: ExplainedRule, readonly mismatched: ReadonlyArray<{ readonly label: string, readonly selector: string, readonly rule: string | null }> }> }
  | { readonly code: 'family_not_published', readonly message: string, readonly family: Family }
  | { readonly code: 'over_cap', readonly message: string, readonly format: FeedFormat, readonly family: Family, readonly entries: number, readonly limit: number }
  | { readonly code: 'changed_since_build', readonly message: string, readonly built_at: string }
  | { readonly code: 'not_built', readonly message: string }
  /** The rules changed since the published build, and a publish guard holds the new one back. */
  | { readonly code: 'held', readonly message: string, readonly guard: string }

export interface ExplainedFormat {
  readonly format: FeedFormat
  readonly family: Family
  readonly status: 200 | 413
  readonly entries: number
  readonly limit: number
  /** The address is in this variant's body. */
  readonly published: boolean
  /** plain, dialect_a, nftables: the network holding the address (also when the variant is a 413). */
  readonly network?: string | null
  /** dialect_b: the rows holding it (one per confidence/severity group that has one). */
  readonly rows?: readonly PublishedRow[]
}

export interface ExplainedAction {
  /** In the body the feed answers for this action with its default format and family. */
  readonly published: boolean
  readonly default: { readonly format: FeedFormat, readonly family: Family }
  readonly formats: readonly ExplainedFormat[]
  /** Selected, current rules of this action that cover the address: what puts it in the feed. */
  readonly rules: readonly ExplainedRule[]
  /** Why it is not published (empty when it is, unless the rules changed since the build). */
  readonly reasons: readonly ExplainReason[]
}

export interface ExplainedFeed {
  /** '*' for the workspace feed, else the list id. */
  readonly feed: FeedId
  readonly list: { readonly id: string, readonly name: string, readonly selector: Readonly<Record<string, string>> } | null
  readonly name: string
  /** null: not built (reason `not_built`). */
  readonly built_at: string | null
  /** Set when a publish guard holds the feed's new content back (FeedHold). */
  readonly held?: FeedHold
  readonly actions: Readonly<Record<FeedAction, ExplainedAction>>
}

export interface Explanation {
  readonly ip: string
  readonly family: 'v4' | 'v6'
  readonly workspace: { readonly id: string, readonly name: string }
  readonly at: string
  readonly geo: {
    readonly country: { readonly code: string, readonly network: string, readonly database: string, readonly database_type: string | null } | null
    readonly asn: { readonly asn: string, readonly organization: string | null, readonly network: string, readonly database: string, readonly database_type: string | null } | null
  }
  readonly feeds: readonly ExplainedFeed[]
}

/** What explaining needs from the store, read once for every feed. */
export interface ExplainFacts {
  readonly address: ExplainAddress
  readonly geo: GeoMatch
  /** Access rules whose target covers the address, lapsed or not. */
  readonly rules: readonly AccessRule[]
  /** Tombstones of swept rules of those targets, whose identity has no rule now. */
  readonly tombstones: readonly LapsedTombstone[]
}

const iso = (ms: number): string => new Date(ms).toISOString()

function identityOf (ruleRef: string | null, target: Target | null): string {
  return ruleRef !== null ? `r:${ruleRef}` : `t:${target?.type}:${target?.value}`
}

/** Reads the rules and tombstones of every target that covers the address. */
export async function gatherFacts (sources: Pick<ExplainSources, 'rules' | 'geo'>, workspaceId: string, address: ExplainAddress): Promise<ExplainFacts> {
  const geo = geoMatchOf(address, sources.geo)
  const targets: Target[] = coveringNetworks(address).map((value) => ({ type: 'ip', value }))
  if (geo.country !== null) targets.push({ type: 'country', value: geo.country.code })
  if (geo.asn !== null) targets.push({ type: 'asn', value: geo.asn.asn })
  const [rules, tombs] = await Promise.all([
    sources.rules.accessRulesOfTargets(workspaceId, targets),
    Promise.all(targets.map((t) => sources.rules.lapsedTombstones(workspaceId, t))),
  ])
  // A rule sent again after its tombstone was written is the current one; its tombstone is history.
  const present = new Set(rules.map((r) => identityOf(r.ruleRef, r.target)))
  const tombstones = tombs.flat().filter((t) => !present.has(identityOf(t.ruleRef, t.target)))
  return { address, geo, rules: [...rules].sort(byTarget), tombstones }
}

const TYPE_ORDER = { ip: 0, country: 1, asn: 2 } as const

/** Most specific first: ip rules by prefix length, then country, then ASN; then by rule_ref. */
function byTarget (a: AccessRule, b: AccessRule): number {
  const ta = TYPE_ORDER[a.target.type]
  const tb = TYPE_ORDER[b.target.type]
  if (ta !== tb) return ta - tb
  if (a.target.type === 'ip') {
    const d = prefixLength(b.target.value) - prefixLength(a.target.value)
    if (d !== 0) return d
  }
  return (a.ruleRef ?? '').localeCompare(b.ruleRef ?? '') || a.seq - b.seq
}

function prefixLength (cidr: string): number {
  return Number(cidr.slice(cidr.indexOf('/') + 1))
}

function ownLabel (values: readonly string[], field: string | null, label: unknown): string | null {
  if (field !== null) return field
  return typeof label === 'string' && values.includes(label) ? label : null
}

function explainRule (r: AccessRule, geo: GeoMatch): ExplainedRule {
  let expansion: ExplainedRule['expansion']
  if (r.target.type === 'country' && geo.country !== null) {
    expansion = { country: geo.country.code, network: geo.country.network, database: geo.country.database, database_type: geo.country.databaseType }
  } else if (r.target.type === 'asn' && geo.asn !== null) {
    expansion = { asn: geo.asn.asn, organization: geo.asn.organization, network: geo.asn.network, database: geo.asn.database, database_type: geo.asn.databaseType }
  }
  return {
    id: r.id,
    kind: 'access_rule',
    target: { type: r.target.type, value: r.target.value },
    rule_ref: r.ruleRef,
    action: r.action,
    name: r.name,
    reason: r.reason,
    labels: r.labels,
    confidence: ownLabel(CONFIDENCES, r.confidence, r.labels.confidence),
    severity: ownLabel(SEVERITIES, r.severity, r.labels.severity),
    created_at: iso(r.createdAt),
    updated_at: iso(r.updatedAt),
    expires_at: r.expiresAt === null ? null : iso(r.expiresAt),
    stream_seq: r.seq,
    ...(expansion !== undefined ? { expansion } : {}),
  }
}

function describe (r: ExplainedRule): string {
  return `${r.action} rule ${r.rule_ref !== null ? `${r.rule_ref} ` : ''}(${r.target.type} ${r.target.value})`
}

const isLive = (r: AccessRule, now: number): boolean => r.expiresAt === null || r.expiresAt > now

/** The formats of the address's family and of `both` (nftables holds one family: not `both`). */
function formatsOf (snapshot: FeedSnapshot, action: FeedAction, facts: ExplainFacts): ExplainedFormat[] {
  const found = lookupPublished(snapshot.published[action], facts.address)
  const out: ExplainedFormat[] = []
  for (const family of [facts.address.family, 'both'] as const) {
    for (const format of FORMATS) {
      const v = snapshot.variants.get(variantKey({ format, family, action, checksum: false }))
      if (v === undefined) continue
      const ok = v.status === 200
      const common = { format, family, status: v.status, entries: v.entries, limit: v.limit }
      out.push(format === 'dialect_b'
        ? { ...common, published: ok && found.rows.length > 0, rows: found.rows }
        : { ...common, published: ok && found.network !== null, network: found.network })
    }
  }
  return out
}

function explainAction (feed: { list: AccessList | null, snapshot: FeedSnapshot | null, held: FeedHold | undefined }, action: FeedAction, facts: ExplainFacts, now: number): ExplainedAction {
  const { list, snapshot } = feed
  // A guard holding this action's new builds: the next build publishes no change until it is accepted.
  const guard = feed.held?.guards[action]
  const nextBuild = guard === undefined
    ? null
    : `a publish guard (${guard}) holds this feed's new ${action} builds since ${feed.held!.since}, so it keeps serving the last published build until build ${feed.held!.digest} is accepted (threatfeed list accept, or POST …/accept)`
  const addr = facts.address
  const selector = list?.selector ?? {}
  const formats = snapshot === null ? [] : formatsOf(snapshot, action, facts)
  const defaultFormat = list?.defaults.format ?? 'plain'
  const listFamily = list?.defaults.family ?? 'both'
  // An nftables list defaulting to `both` has no such variant; its appliances ask per family.
  const defaultFamily: Family = defaultFormat === 'nftables' && listFamily === 'both' ? addr.family : listFamily
  const familyOut = defaultFamily !== 'both' && defaultFamily !== addr.family
  const chosen = formats.find((f) => f.format === defaultFormat && f.family === defaultFamily)
  const published = !familyOut && chosen !== undefined && chosen.published

  const ofAction = facts.rules.filter((r) => r.action === action)
  const live = ofAction.filter((r) => isLive(r, now))
  const selected = live.filter((r) => matchesSelector(r.labels, selector))
  const rules = selected.map((r) => explainRule(r, facts.geo))
  const reasons: ExplainReason[] = []
  const builtAt = snapshot === null ? '' : iso(snapshot.builtAt)
  const inNetworks = formats.some((f) => f.format === 'plain' && f.network !== null)
  if (snapshot === null) {
    const name = list === null ? 'the workspace feed' : `list ${list.name}`
    const ask = list === null ? 'poll /v1/threat/feeds' : `ask with list=${list.id}`
    reasons.push({ code: 'not_built', message: `not built: nobody polled ${name} lately, and explaining every feed builds none (${ask} to build it); what follows comes from the rules alone` })
  }

  if (published) {
    if (rules.length === 0 && nextBuild !== null) reasons.push({ code: 'held', message: `no current ${action} rule selected here covers ${addr.text}, but ${nextBuild}; accepting it drops ${addr.text}`, guard: guard! })
    else if (rules.length === 0) reasons.push({ code: 'changed_since_build', message: `no current ${action} rule selected here covers ${addr.text}: the rules that put it there changed after this snapshot was built at ${builtAt}; the next build drops it`, built_at: builtAt })
    return { published, default: { format: defaultFormat, family: defaultFamily }, formats, rules, reasons }
  }
  if (familyOut) {
    reasons.push({ code: 'family_not_published', message: `this feed publishes ${defaultFamily} only by default; ${addr.text} is ${addr.family} (ask with family=${addr.family} or family=both)`, family: defaultFamily })
  } else if (chosen !== undefined && chosen.status === 413) {
    reasons.push({ code: 'over_cap', message: `the ${chosen.format} ${chosen.family} variant has ${chosen.entries} entries, over its limit of ${chosen.limit}: it answers 413`, format: chosen.format, family: chosen.family, entries: chosen.entries, limit: chosen.limit })
  }
  const carvers = action === 'block' ? facts.rules.filter((r) => r.action === 'allow' && isLive(r, now)).map((r) => explainRule(r, facts.geo)) : []
  if (rules.length > 0 && carvers.length > 0) {
    reasons.push({ code: 'carved', message: `carved out by ${carvers.map(describe).join(', ')}: an allow rule of the workspace always wins`, by: carvers })
  } else if (rules.length > 0 && !inNetworks && snapshot !== null && nextBuild !== null) {
    reasons.push({ code: 'held', message: `a current ${action} rule covers ${addr.text}, but ${nextBuild}; accepting it publishes ${addr.text}`, guard: guard! })
  } else if (rules.length > 0 && !inNetworks && snapshot !== null) {
    const newest = Math.max(...selected.map((r) => r.updatedAt))
    reasons.push({ code: 'changed_since_build', message: `the rules covering it changed at ${iso(newest)}, after this snapshot was built at ${builtAt}; the next build publishes it`, built_at: builtAt })
  }
  const unselected = live.filter((r) => !matchesSelector(r.labels, selector))
  if (unselected.length > 0) {
    const entries = unselected.map((r) => ({
      rule: explainRule(r, facts.geo),
      mismatched: Object.entries(selector)
        .filter(([k, v]) => !Object.hasOwn(r.labels, k) || String(r.labels[k]) !== v)
        .map(([k, v]) => ({ label: k, selector: v, rule: Object.hasOwn(r.labels, k) ? String(r.labels[k]) : null })),
    }))
    const what = entries.map((e) => `${describe(e.rule)}: ${e.mismatched.map((m) => `${m.label}=${m.rule ?? '(absent)'}, selector wants ${m.label}=${m.selector}`).join('; ')}`)
    reasons.push({ code: 'not_selected', message: `the list's selector does not select ${what.join(' | ')}`, rules: entries })
  }
  const lapsed: LapsedEntry[] = [
    ...ofAction.filter((r) => !isLive(r, now)).map((r) => ({ target: r.target, rule_ref: r.ruleRef, lapsed_at: iso(r.expiresAt!), swept: false, rule: explainRule(r, facts.geo) })),
    // A tombstone keeps neither labels nor (before the action was kept) the action.
    ...facts.tombstones.filter((t) => t.action === undefined || t.action === action).map((t) => ({ target: t.target, rule_ref: t.ruleRef, lapsed_at: iso(t.lapsedAt), swept: true })),
  ].sort((a, b) => b.lapsed_at.localeCompare(a.lapsed_at))
  if (lapsed.length > 0) {
    reasons.push({ code: 'lapsed', message: lapsed.map((l) => `${action} rule ${l.rule_ref ?? ''}${l.rule_ref !== null ? ' ' : ''}(${l.target?.type} ${l.target?.value}) lapsed at ${l.lapsed_at}${l.swept ? ' (swept; from its tombstone)' : ''}`).join('; '), lapsed })
  }
  if (ofAction.length === 0 && lapsed.length === 0) {
    reasons.push({ code: 'no_rule', message: `no ${action} rule covers ${addr.text}` })
  }
  return { published, default: { format: defaultFormat, family: defaultFamily }, formats, rules, reasons }
}

/**
 * Explains the address in every feed given: the workspace feed (list null) and lists.
 *
 * @example
 *   const e = await explainAddress(sources, workspace, [null, ...lists], parseExplainAddress('203.0.113.7'), Date.now())
 *   e.feeds[0].actions.block.published
 */
export async function explainAddress (
  sources: ExplainSources,
  workspace: { id: string, name: string },
  feeds: ReadonlyArray<AccessList | null>,
  address: ExplainAddress,
  now: number,
): Promise<Explanation> {
  const [facts, snapshots] = await Promise.all([
    gatherFacts(sources, workspace.id, address),
    Promise.all(feeds.map((list) => sources.snapshotOf(list))),
  ])
  return {
    ip: address.text,
    family: address.family,
    workspace: { id: workspace.id, name: workspace.name },
    at: iso(now),
    geo: {
      country: facts.geo.country === null ? null : { code: facts.geo.country.code, network: facts.geo.country.network, database: facts.geo.country.database, database_type: facts.geo.country.databaseType },
      asn: facts.geo.asn === null ? null : { asn: facts.geo.asn.asn, organization: facts.geo.asn.organization, network: facts.geo.asn.network, database: facts.geo.asn.database, database_type: facts.geo.asn.databaseType },
    },
    feeds: feeds.map((list, i) => {
      const snapshot = snapshots[i]!
      const feedId = list?.id ?? WORKSPACE_FEED
      const held = sources.heldBy?.(workspace.id, feedId)
      const actions = Object.fromEntries(FEED_ACTIONS.map((a) => [a, explainAction({ list, snapshot, held }, a, facts, now)])) as Record<FeedAction, ExplainedAction>
      return {
        feed: feedId,
        list: list === null ? null : { id: list.id, name: list.name, selector: list.selector },
        name: snapshot?.name ?? list?.name ?? workspace.name,
        built_at: snapshot === null ? null : iso(snapshot.builtAt),
        ...(held !== undefined ? { held } : {}),
        actions,
      }
    }),
  }
}
