/**
 * One workspace whose rules give every explain reason, written straight into a store (the HTTP
 * and CLI explain tests share it): a direct IP inside a CIDR of another dialect_b group, a CIDR
 * half carved by an allow, a country and an ASN rule (expanded with the test MMDBs), a rule left
 * out by a list's selector, a lapsed rule still stored and one the sweep removed, a list over
 * its cap and one publishing IPv6 only.
 */
import { SWEEP_GRAIN_MS, type AccessRule, type AccessRuleInput, type Store, type Target } from '../../src/store/types.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { ExplainedRule } from '../../src/feed/explain.js'

export interface ExplainFixture {
  readonly workspaceId: string
  readonly lists: { readonly edge: string, readonly tiny: string, readonly v6only: string }
  /** rules:read (and feeds:read, signals:write), and feeds:read only. */
  readonly rulesKey: string
  readonly feedsKey: string
  /** When the swept rule lapsed. */
  readonly sweptAt: number
  /** When the stored lapsed rule lapsed. */
  readonly lapsedAt: number
}

function input (workspaceId: string, ruleRef: string, target: Target, over: Partial<AccessRuleInput> = {}): AccessRuleInput {
  return { kind: 'access_rule', workspaceId, ruleRef, target, action: 'block', name: null, confidence: null, severity: null, labels: {}, reason: null, expiresAt: null, seq: 1, ...over }
}

const ip = (value: string): Target => ({ type: 'ip', value })

export async function seedExplainFixture (store: Store, now = Date.now()): Promise<ExplainFixture> {
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  const rulesKey = generateApiKey()
  const feedsKey = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(rulesKey), scopes: ['signals:write', 'feeds:read', 'rules:read'] })
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(feedsKey), scopes: ['feeds:read'] })
  const list = (name: string, defaults: object, selector: Record<string, string>): Promise<{ id: string }> =>
    store.lists.create({ workspaceId: ws.id, name, description: '', defaults, selector })
  const edge = await list('edge', {}, { team: 'edge' })
  const tiny = await list('tiny', { maxEntries: 1 }, {})
  const v6only = await list('v6only', { family: 'v6' }, {})

  // Swept before the rest is written: a sweep at `now` removes what lapsed before its grain.
  const sweptAt = Math.floor(now / SWEEP_GRAIN_MS) * SWEEP_GRAIN_MS - 60_000
  await store.rules.upsertAccessRule(input(ws.id, 'swept', ip('192.0.2.60/32'), { expiresAt: sweptAt, seq: 1 }))
  for (;;) if (!(await store.rules.sweepLapsed(now, 1000)).more) break
  const lapsedAt = now - 1000
  const w = ws.id
  const rules: AccessRuleInput[] = [
    input(w, 'lapsed-kept', ip('192.0.2.50/32'), { expiresAt: lapsedAt, seq: 2 }),
    input(w, 'r-ip', ip('203.0.113.7/32'), { labels: { confidence: 'medium', team: 'edge' }, seq: 3, reason: 'scanner' }),
    input(w, 'r-net', ip('203.0.113.0/24'), { labels: { severity: 'critical', team: 'edge' }, seq: 4 }),
    input(w, 'r-cidr', ip('198.51.100.0/24'), { labels: { team: 'edge' }, seq: 5 }),
    input(w, 'a-carve', ip('198.51.100.128/25'), { action: 'allow', seq: 6 }),
    input(w, 'r-se', { type: 'country', value: 'SE' }, { labels: { team: 'geo' }, seq: 7 }),
    input(w, 'r-as', { type: 'asn', value: 'AS1221' }, { labels: { team: 'edge' }, expiresAt: now + 86_400_000, seq: 8 }),
    input(w, 'r-v6', ip('2001:db8::/32'), { labels: { team: 'edge' }, seq: 9 }),
  ]
  for (const r of rules) await store.rules.upsertAccessRule(r)
  return { workspaceId: ws.id, lists: { edge: edge.id, tiny: tiny.id, v6only: v6only.id }, rulesKey, feedsKey, sweptAt, lapsedAt }
}

/** What explain shows of a stored rule (the expected value of the exact-field tests). */
export function expectedRule (r: AccessRule, expansion?: ExplainedRule['expansion']): ExplainedRule {
  const own = (field: string | null, label: unknown, values: readonly string[]): string | null =>
    field ?? (typeof label === 'string' && values.includes(label) ? label : null)
  return {
    id: r.id,
    kind: 'access_rule',
    target: r.target,
    rule_ref: r.ruleRef,
    action: r.action,
    name: r.name,
    reason: r.reason,
    labels: r.labels,
    confidence: own(r.confidence, r.labels.confidence, ['low', 'medium', 'high']),
    severity: own(r.severity, r.labels.severity, ['low', 'medium', 'high', 'critical']),
    created_at: new Date(r.createdAt).toISOString(),
    updated_at: new Date(r.updatedAt).toISOString(),
    expires_at: r.expiresAt === null ? null : new Date(r.expiresAt).toISOString(),
    stream_seq: r.seq,
    ...(expansion !== undefined ? { expansion } : {}),
  }
}
