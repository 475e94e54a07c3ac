/**
 * Property: for random feeds (overlapping IPv4 and IPv6 rules, allows that carve, dialect_b groups,
 * lists with selectors, default families and small caps, some lapsed rules, country and ASN rules
 * over the test MMDBs) and random addresses, what explain says is published in each variant is
 * exactly whether a line of that variant's served body holds the address — read back from the
 * body bytes with an independent parser — and the network (or dialect_b rows) it names is that line.
 */
import t from 'tap'
import fc from 'fast-check'
import { buildSnapshot } from '../../src/feed/build-snapshot.js'
import { explainAddress, type ExplainSources } from '../../src/feed/explain.js'
import { parseExplainAddress } from '../../src/feed/explain-lookup.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { LastModifiedKeeper } from '../../src/feed/last-modified.js'
import { toRuleTable } from '../../src/feed/rule-table.js'
import { variantKey } from '../../src/feed/snapshot-types.js'
import { GeoLookup } from '../../src/geo/lookup.js'
import { formatIpv6, parseIpv4, parseIpv6 } from '../../src/net/ip.js'
import type { AccessList, AccessRule, Target } from '../../src/store/types.js'
import { GEO_FIXTURES, tempStore, testGeo } from './fixtures.js'

const temp = await tempStore()
t.teardown(() => temp.cleanup())
const geo = await testGeo()
const lookup = GeoLookup.open({ countryDb: `${GEO_FIXTURES}/GeoLite2-Country-Test.mmdb`, asnDb: `${GEO_FIXTURES}/GeoLite2-ASN-Test.mmdb` })
const lastModified = new LastModifiedKeeper(temp.store.feedVersions, { timeoutMs: 2000 })
const NOW = Date.now()
const WS = 'aaaaaaaa-0000-4000-8000-000000000001'

/** An address as a bigint, IPv4 in its own space (family told apart by the caller). */
function toBig (text: string): { v6: boolean, n: bigint } {
  const v4 = parseIpv4(text)
  if (v4 >= 0) return { v6: false, n: BigInt(v4) }
  const w = new Uint32Array(4)
  if (!parseIpv6(text, w)) throw new Error(`bad address in a body: ${text}`)
  return { v6: true, n: w.reduce((a, x) => (a << 32n) | BigInt(x), 0n) }
}

/** [first, last] of a body line's network: a CIDR, an address, or `first-last`. */
function rangeOf (value: string): { v6: boolean, first: bigint, last: bigint } {
  const dash = value.indexOf('-')
  if (dash > 0) {
    const a = toBig(value.slice(0, dash))
    return { v6: a.v6, first: a.n, last: toBig(value.slice(dash + 1)).n }
  }
  const slash = value.indexOf('/')
  const a = toBig(slash < 0 ? value : value.slice(0, slash))
  const bits = a.v6 ? 128 : 32
  const len = slash < 0 ? bits : Number(value.slice(slash + 1))
  const size = 1n << BigInt(bits - len)
  return { v6: a.v6, first: a.n, last: a.n + size - 1n }
}

/** The network values of a body: plain and dialect_a lines, nftables elements, dialect_b rows' first column. */
function bodyValues (format: string, body: string): Array<{ value: string, line: string }> {
  if (format === 'nftables') return body === '' ? [] : body.replace(/^elements = \{ | \}\n?$/g, '').split(', ').map((v) => ({ value: v, line: v }))
  return body.split('\n').filter((l) => l !== '' && !l.startsWith('#')).map((l) => ({ value: format === 'dialect_b' ? l.slice(0, l.indexOf(',')) : l, line: l }))
}

const V4_RULES = ['10.0.0.0', '10.0.1.0', '10.0.1.128', '10.0.2.0', '10.0.255.0']
const arbV4Target = fc.tuple(fc.constantFrom(...V4_RULES), fc.integer({ min: 0, max: 255 }), fc.integer({ min: 16, max: 32 }))
  .map(([base, low, len]) => {
    const a = (parseIpv4(base) + low) >>> 0
    const masked = len === 0 ? 0 : (a & ((0xffffffff << (32 - len)) >>> 0)) >>> 0
    return `${[24, 16, 8, 0].map((s) => (masked >>> s) & 255).join('.')}/${len}`
  })
const arbV6Target = fc.tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 112, max: 128 }))
  .map(([low, len]) => {
    const masked = len >= 128 ? low : low & ~((1 << (128 - len)) - 1) & 0xffff
    // Stored targets are canonical (RFC 5952), as ingest normalizes them.
    return `${formatIpv6([0x20010db8, 0, 0, masked])}/${len}`
  })
const arbGeoTarget = fc.constantFrom<Target>({ type: 'country', value: 'SE' }, { type: 'asn', value: 'AS1221' }, { type: 'country', value: 'GB' })

const arbRule = fc.record({
  target: fc.oneof({ weight: 6, arbitrary: arbV4Target.map((value): Target => ({ type: 'ip', value })) }, { weight: 2, arbitrary: arbV6Target.map((value): Target => ({ type: 'ip', value })) }, { weight: 1, arbitrary: arbGeoTarget }),
  allow: fc.boolean().map((b) => b && Math.random() < 0.5),
  confidence: fc.constantFrom(null, 'low', 'high'),
  severity: fc.constantFrom(null, 'critical'),
  team: fc.constantFrom(undefined, 'a', 'b'),
  lapsed: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
})
const arbList = fc.record({
  team: fc.constantFrom(undefined, 'a'),
  family: fc.constantFrom(undefined, 'v4', 'v6', 'both'),
  maxEntries: fc.constantFrom(undefined, 2, 1000),
  confidence: fc.constantFrom(undefined, 'medium'),
})
const arbAddress = fc.oneof(
  fc.tuple(fc.constantFrom(...V4_RULES), fc.integer({ min: 0, max: 300 })).map(([b, d]) => { const a = (parseIpv4(b) + d) >>> 0; return [24, 16, 8, 0].map((s) => (a >>> s) & 255).join('.') }),
  fc.integer({ min: 0, max: 0xffff }).map((x) => `2001:db8::${x.toString(16)}`),
  fc.constantFrom('89.160.20.115', '89.160.20.200', '1.130.0.1', '2.125.160.218', '2001:8000::1', '2a02:d040::1'),
)

t.test('published in a variant ⇔ a line of its body holds the address, and names that line', async (t) => {
let runs = 0
await fc.assert(fc.asyncProperty(fc.array(arbRule, { minLength: 1, maxLength: 14 }), fc.array(arbList, { maxLength: 2 }), fc.array(arbAddress, { minLength: 1, maxLength: 6 }), async (specs, listSpecs, addresses) => {
  runs++
  const rules: AccessRule[] = specs.map((s, i) => ({
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    kind: 'access_rule',
    workspaceId: WS,
    ruleRef: `r${i}`,
    target: s.target,
    action: s.allow ? 'allow' : 'block',
    name: null,
    confidence: s.confidence as AccessRule['confidence'],
    severity: s.severity as AccessRule['severity'],
    labels: s.team === undefined ? {} : { team: s.team } as Record<string, string>,
    reason: null,
    expiresAt: s.lapsed ? NOW - 1000 : null,
    createdAt: NOW - 5000,
    updatedAt: NOW - 5000,
    seq: i + 1,
  }))
  const lists: AccessList[] = listSpecs.map((l, i) => ({
    id: `bbbbbbbb-0000-4000-8000-${String(i).padStart(12, '0')}`,
    workspaceId: WS,
    name: `l${i}`,
    description: '',
    defaults: { ...(l.family !== undefined ? { family: l.family as 'v4' } : {}), ...(l.maxEntries !== undefined ? { maxEntries: l.maxEntries } : {}), ...(l.confidence !== undefined ? { confidence: 'medium' as const } : {}) },
    selector: l.team === undefined ? {} : { team: l.team } as Record<string, string>,
    createdAt: NOW,
    updatedAt: NOW,
  }))
  const table = toRuleTable(rules)
  const key = (t: Target): string => `${t.type}:${t.value}`
  const sources: ExplainSources = {
    rules: {
      accessRulesOfTargets: async (_ws, targets) => { const want = new Set(targets.map(key)); return rules.filter((r) => want.has(key(r.target))) },
      lapsedTombstones: async () => [],
    },
    geo: { index: geo, lookup },
    snapshotOf: async (list) => (await buildSnapshot({ workspaceId: WS, workspaceName: 'prop', list }, table, { tasks: inProcessTasks(geo), lastModified, now: NOW })).snapshot,
  }
  const feeds = [null, ...lists]
  const snapshots = new Map<string, Awaited<ReturnType<ExplainSources['snapshotOf']>>>()
  for (const list of feeds) snapshots.set(list?.id ?? '*', await sources.snapshotOf(list))
  const cached: ExplainSources = { ...sources, snapshotOf: async (list) => snapshots.get(list?.id ?? '*')! }
  for (const ip of addresses) {
    const addr = parseExplainAddress(ip)
    const at = toBig(addr.text)
    const e = await explainAddress(cached, { id: WS, name: 'prop' }, feeds, addr, NOW)
    for (const f of e.feeds) {
      const snapshot = snapshots.get(f.feed)!
      for (const action of ['block', 'allow'] as const) {
        const a = f.actions[action]
        t.equal(a.formats.length, 7, 'four formats of the family, three of both')
        for (const v of a.formats) {
          const variant = snapshot.variants.get(variantKey({ format: v.format, family: v.family, action, checksum: false }))!
          const body = variant.status === 200 ? Buffer.from(variant.identity.body).toString('utf8') : ''
          const holding = bodyValues(v.format, body).filter((b) => { const r = rangeOf(b.value); return r.v6 === (addr.family === 'v6') && r.first <= at.n && at.n <= r.last })
          const where = `${ip} ${f.name} ${action} ${v.format} ${v.family}`
          if (v.published !== (holding.length > 0)) t.fail(`${where}: explain says ${v.published}, body holds ${JSON.stringify(holding)}`)
          if (v.published) {
            const named = v.format === 'dialect_b' ? v.rows!.map((r) => r.row) : [v.network!]
            if (JSON.stringify(holding.map((h) => h.line).sort()) !== JSON.stringify(named.sort())) t.fail(`${where}: names ${JSON.stringify(named)}, body lines ${JSON.stringify(holding)}`)
          }
        }
        // Published (default variant) needs a rule that covers the address, or says the rules changed.
        if (a.published && a.rules.length === 0) t.fail(`${ip} ${f.name} ${action}: published without a rule`)
        if (!a.published && a.reasons.length === 0) t.fail(`${ip} ${f.name} ${action}: not published and no reason`)
      }
    }
  }
}), { numRuns: 60, seed: Number(process.env.EXPLAIN_SEED ?? 20), endOnFailure: true })
t.ok(runs >= 60, `${runs} random feeds explained`)
})
