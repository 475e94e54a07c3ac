/**
 * A workspace's access rules as the feed side keeps them: one compact table per workspace instead
 * of an object per rule, plus which rules a feed publishes and how they group for dialect_b.
 *
 * Why a table: the service keeps each workspace's rules in memory between fetches (it rebuilds
 * from them when the store is down, and at every rule expiry). 100,000 rules as store objects take
 * ~170 MB of heap (ids, nested target and labels objects per rule); as columns they take a few MB
 * (a typed array per field, the target strings, and each distinct label set once).
 *
 * Selection (DECISIONS §4): a list selects the rules whose labels hold every key=value of its
 * selector; a number or boolean label matches its string form; an empty selector, and the
 * workspace feed, select every rule. Confidence and severity (SPEC 4.5): the rule's own (its field,
 * else its label), else the list's default, else `high`; each falls back on its own.
 */
import type { AccessList, AccessRule, Confidence, LabelValue, ListDefaults, Severity } from '../store/types.js'
import { CONFIDENCES, SEVERITIES } from '../store/types.js'
import type { LapseTargets, TargetGroup } from '../pool/protocol.js'
import { ROWS_PER_YIELD, runWhole } from './slices.js'

const TYPE_IP = 0
const TYPE_ASN = 1
const TYPE_COUNTRY = 2
const CH_NL = 0x0a
const NON_ASCII = 0x80

export interface RuleTable {
  readonly length: number
  /** 0 ip, 1 asn, 2 country. */
  readonly type: Uint8Array
  /** 1 for an allow rule, 0 for a block rule. */
  readonly allow: Uint8Array
  /** The normalized target value (CIDR, `AS<n>`, country code). */
  readonly value: readonly string[]
  /** Lapses at this instant; Infinity for never. */
  readonly expiresAt: Float64Array
  /** Index into labelSets. */
  readonly labels: Uint32Array
  readonly labelSets: ReadonlyArray<Readonly<Record<string, LabelValue>>>
  /** The rule's own confidence / severity: 0 none, else index in CONFIDENCES / SEVERITIES + 1. */
  readonly confidence: Uint8Array
  readonly severity: Uint8Array
  /** Changes whenever a rule is added, updated or removed (see fingerprintRules). */
  readonly fingerprint: string
}

function ownRank (values: readonly string[], field: string | null, label: unknown): number {
  if (field !== null) {
    const i = values.indexOf(field)
    if (i >= 0) return i + 1
  }
  return typeof label === 'string' ? values.indexOf(label) + 1 : 0
}

/**
 * Order-sensitive digest of a rule set: any insert, update or delete changes the count, the newest
 * updatedAt or the seq sum (every write carries a new stream seq). Numbers only.
 */
function fingerprintRules (rules: readonly AccessRule[]): string {
  let newest = 0
  let seqSum = 0
  let mix = 0
  for (const r of rules) {
    if (r.updatedAt > newest) newest = r.updatedAt
    seqSum += r.seq
    mix = (Math.imul(mix ^ (r.updatedAt % 0x100000000), 0x01000193) ^ ((r.expiresAt ?? 0) % 0x100000000)) >>> 0
  }
  return `${rules.length}:${newest}:${seqSum}:${mix}`
}

function isEmpty (o: object): boolean {
  for (const _ in o) return false
  return true
}

/**
 * @example
 *   const table = toRuleTable(await store.rules.listAccessRules(workspaceId, Date.now()))
 */
export function toRuleTable (rules: readonly AccessRule[]): RuleTable {
  const n = rules.length
  const type = new Uint8Array(n)
  const allow = new Uint8Array(n)
  const value = new Array<string>(n)
  const expiresAt = new Float64Array(n)
  const labels = new Uint32Array(n)
  const confidence = new Uint8Array(n)
  const severity = new Uint8Array(n)
  const labelSets: Array<Record<string, LabelValue>> = []
  const seen = new Map<string, number>()
  for (let i = 0; i < n; i++) {
    const r = rules[i]!
    type[i] = r.target.type === 'ip' ? TYPE_IP : r.target.type === 'asn' ? TYPE_ASN : TYPE_COUNTRY
    allow[i] = r.action === 'allow' ? 1 : 0
    value[i] = r.target.value
    expiresAt[i] = r.expiresAt ?? Infinity
    // Rules mostly share a handful of label sets (often none): keep each once.
    const key = isEmpty(r.labels) ? '' : JSON.stringify(r.labels)
    let li = seen.get(key)
    if (li === undefined) {
      li = labelSets.length
      labelSets.push(r.labels)
      seen.set(key, li)
    }
    labels[i] = li
    confidence[i] = ownRank(CONFIDENCES, r.confidence, r.labels.confidence)
    severity[i] = ownRank(SEVERITIES, r.severity, r.labels.severity)
  }
  return { length: n, type, allow, value, expiresAt, labels, labelSets, confidence, severity, fingerprint: fingerprintRules(rules) }
}

/**
 * @example
 *   matchesSelector({ team: 'edge', tier: 2 }, { tier: '2' }) // true
 *   matchesSelector({ team: 'edge' }, {})                     // true
 */
export function matchesSelector (labels: Readonly<Record<string, LabelValue>>, selector: Readonly<Record<string, string>>): boolean {
  for (const key in selector) {
    if (!Object.hasOwn(selector, key)) continue
    if (!Object.hasOwn(labels, key)) return false
    if (String(labels[key]) !== selector[key]) return false
  }
  return true
}

/** What one feed takes from the table at one instant: row indices, by role. */
export interface Selection {
  /** Selected rules, not lapsed. */
  readonly block: Uint32Array
  readonly allow: Uint32Array
  /** Every allow rule of the workspace, not lapsed: the carve of the deny feed (DECISIONS §5). */
  readonly carve: Uint32Array
  /** Earliest expiry among them: the snapshot's expiresAt. */
  readonly expiresAt: number
}

export function selectRules (t: RuleTable, list: AccessList | null, now: number): Selection {
  return runWhole(selecting(t, list, now))
}

/** selectRules as a sliceable loop (slices.ts). */
export function * selecting (t: RuleTable, list: AccessList | null, now: number): Generator<void, Selection> {
  const selector = list?.selector ?? {}
  const all = Object.keys(selector).length === 0
  // The selector is decided once per label set, not once per rule.
  const matches = t.labelSets.map((l) => all || matchesSelector(l, selector))
  const block: number[] = []
  const allow: number[] = []
  const carve: number[] = []
  let expiresAt = Infinity
  for (let i = 0; i < t.length; i++) {
    if (i % ROWS_PER_YIELD === 0) yield
    const e = t.expiresAt[i]!
    if (e <= now) continue
    const isAllow = t.allow[i] === 1
    const selected = matches[t.labels[i]!]!
    if (isAllow) carve.push(i)
    if (selected) (isAllow ? allow : block).push(i)
    if ((selected || isAllow) && e < expiresAt) expiresAt = e
  }
  return { block: Uint32Array.from(block), allow: Uint32Array.from(allow), carve: Uint32Array.from(carve), expiresAt }
}

function emptyGroup (confidence: string, severity: string): TargetGroup {
  return { confidence, severity, ips: EMPTY_TEXT, asns: [], countries: [] }
}

const EMPTY_TEXT = new Uint8Array(0)

function asnNumber (value: string): number {
  // Stored as `AS<digits>` (DECISIONS §3); anything else matches no network.
  const n = Number(value.slice(2))
  return value.length > 2 && Number.isSafeInteger(n) ? n : -1
}

/** Rows of the `ip` targets of a group, gathered before their text is written (see ipText). */
type IpRows = number[]

function addTarget (t: RuleTable, i: number, group: TargetGroup, ips: IpRows): void {
  const type = t.type[i]
  if (type === TYPE_IP) ips.push(i)
  else if (type === TYPE_ASN) group.asns.push(asnNumber(t.value[i]!))
  else group.countries.push(t.value[i]!)
}

/**
 * Targets of some rows grouped by (confidence, severity), in a fixed group order (confidence, then
 * severity, each in the order of store/types.ts) so that rows tie-break the same way every build.
 */
export function groupTargets (t: RuleTable, rows: Uint32Array, defaults: ListDefaults | null): TargetGroup[] {
  return runWhole(grouping(t, rows, defaults))
}

/** groupTargets as a sliceable loop (slices.ts). */
export function * grouping (t: RuleTable, rows: Uint32Array, defaults: ListDefaults | null): Generator<void, TargetGroup[]> {
  const dc = defaults?.confidence ?? 'high'
  const ds = defaults?.severity ?? 'high'
  const groups = new Map<number, { group: TargetGroup, ips: IpRows }>()
  for (let k = 0; k < rows.length; k++) {
    if (k % ROWS_PER_YIELD === 0) yield
    const i = rows[k]!
    const c = t.confidence[i]!
    const s = t.severity[i]!
    const confidence = c === 0 ? dc : CONFIDENCES[c - 1]!
    const severity = s === 0 ? ds : SEVERITIES[s - 1]!
    const key = CONFIDENCES.indexOf(confidence as Confidence) * SEVERITIES.length + SEVERITIES.indexOf(severity as Severity)
    let g = groups.get(key)
    if (g === undefined) {
      g = { group: emptyGroup(confidence, severity), ips: [] }
      groups.set(key, g)
    }
    addTarget(t, i, g.group, g.ips)
  }
  const out: TargetGroup[] = []
  for (const [, { group, ips }] of [...groups.entries()].sort((a, b) => a[0] - b[0])) out.push({ ...group, ips: yield * ipText(t, ips) })
  return out
}

/** Every target of some rows in one group (the carve: labels do not matter there). */
export function allTargets (t: RuleTable, rows: Uint32Array): TargetGroup {
  return runWhole(allTargeting(t, rows))
}

export function * allTargeting (t: RuleTable, rows: Uint32Array): Generator<void, TargetGroup> {
  const group = emptyGroup('high', 'high')
  const ips: IpRows = []
  for (let k = 0; k < rows.length; k++) {
    if (k % ROWS_PER_YIELD === 0) yield
    addTarget(t, rows[k]!, group, ips)
  }
  return { ...group, ips: yield * ipText(t, ips) }
}

/**
 * The targets of some rows with each one's expiry, for the lapse of each published network
 * (src/feed/render/lapses.ts): the ip targets' text shared as the groups' is, and their expiries
 * in shared memory beside it, line for line.
 */
export function * lapsing (t: RuleTable, rows: Uint32Array): Generator<void, LapseTargets> {
  const ipRows: IpRows = []
  const out: LapseTargets = { ips: EMPTY_TEXT, ipExpiry: new Float64Array(0), asns: [], asnExpiry: [], countries: [], countryExpiry: [] }
  for (let k = 0; k < rows.length; k++) {
    if (k % ROWS_PER_YIELD === 0) yield
    const i = rows[k]!
    const type = t.type[i]
    if (type === TYPE_IP) ipRows.push(i)
    else if (type === TYPE_ASN) {
      out.asns.push(asnNumber(t.value[i]!))
      out.asnExpiry.push(t.expiresAt[i]!)
    } else {
      out.countries.push(t.value[i]!)
      out.countryExpiry.push(t.expiresAt[i]!)
    }
  }
  const ipExpiry = new Float64Array(new SharedArrayBuffer(ipRows.length * 8))
  for (let k = 0; k < ipRows.length; k++) ipExpiry[k] = t.expiresAt[ipRows[k]!]!
  return { ...out, ips: yield * ipText(t, ipRows), ipExpiry }
}

/**
 * The targets of some rows one a line, written a slice at a time into shared memory: the pool's
 * task then shares it instead of cloning it, and no step costs the thread more than a slice (a
 * joined string of millions of targets was one long join, then one long copy into the task).
 * Targets are ASCII (canonical CIDRs); any other char is written as 0x80, which no reader accepts.
 */
function * ipText (t: RuleTable, rows: IpRows): Generator<void, Uint8Array> {
  let length = 0
  for (let k = 0; k < rows.length; k++) {
    if (k % ROWS_PER_YIELD === 0) yield
    length += t.value[rows[k]!]!.length + 1
  }
  const out = new Uint8Array(new SharedArrayBuffer(length))
  let o = 0
  for (let k = 0; k < rows.length; k++) {
    if (k % ROWS_PER_YIELD === 0) yield
    const v = t.value[rows[k]!]!
    for (let c = 0; c < v.length; c++) {
      const ch = v.charCodeAt(c)
      out[o++] = ch < NON_ASCII ? ch : NON_ASCII
    }
    out[o++] = CH_NL
  }
  return out
}
