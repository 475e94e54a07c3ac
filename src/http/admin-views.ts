/**
 * The admin API's read-only views (docs/admin-api.md): rules (search, paged), consumers, recent
 * signal batches, feed sizes over 30 days, and the audit log as JSON lines.
 */
import { ThreatfeedError } from '../errors.js'
import { consumerViews } from '../feed/consumer-status.js'
import { normalizeTarget } from '../ingest/targets.js'
import { RULE_KINDS, type JournalEntry, type JournalStore, type JournalTable, type Rule, type RuleKind, type Store, type Target } from '../store/types.js'
import { workspaceFor } from './admin-access.js'
import { encodeCursor, invalid, iso, readPage, readQuery, sendAdmin, sendAdminText, type AdminRoute, type Cursor, type PageRequest } from './admin-io.js'
import { JOURNAL_BOUNDS } from './admin-journal.js'

/** `1.2.3.4`, `10.0.0.0/8`, `2001:db8::/32` → ip; `AS13335` → asn; `DE` → country. */
function parseTargetQuery (text: string): Target {
  const holder = /^as\d+$/i.test(text) ? { asn: text } : /^[A-Za-z]{2}$/.test(text) ? { country: text } : { ip: text }
  const r = normalizeTarget(holder, '', { asnExists: null })
  if (!r.ok) throw invalid([{ field: 'target', message: r.failure.message, value: text }])
  return r.target
}

function parseLabels (pairs: readonly string[]): Array<[string, string]> {
  return pairs.map((p) => {
    const eq = p.indexOf('=')
    if (eq <= 0) throw invalid([{ field: 'label', message: 'must be key=value', value: p }])
    return [p.slice(0, eq), p.slice(eq + 1)]
  })
}

/** Newest first: created later, then the greater id. */
function newerFirst (a: { at: number, id: string }, b: { at: number, id: string }): number {
  return b.at - a.at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)
}

function isBefore (r: { at: number, id: string }, c: Cursor | undefined): boolean {
  return c === undefined || r.at < c.at || (r.at === c.at && r.id < c.id)
}

function showRule (r: Rule, now: number): Record<string, unknown> {
  const common = { id: r.id, kind: r.kind, rule_ref: r.ruleRef, labels: r.labels, reason: r.reason, expires_at: iso(r.expiresAt), lapsed: r.expiresAt !== null && r.expiresAt <= now, created_at: iso(r.createdAt), updated_at: iso(r.updatedAt) }
  if (r.kind === 'access_rule') return { ...common, target: r.target, action: r.action, name: r.name, confidence: r.confidence, severity: r.severity }
  return { ...common, name: r.name, type: r.type, expression: r.expression, action: r.action, order: r.order, short_description: r.shortDescription, config: r.config }
}

/**
 * The page of rules before the cursor, newest first. Access rules without a target are streamed
 * (a workspace may hold millions), keeping only the best `limit + 1` in memory.
 */
async function findRules (store: Store, workspaceId: string, kind: RuleKind, target: Target | null, keep: (r: Rule) => boolean, page: PageRequest, now: number): Promise<{ rules: Rule[], more: boolean }> {
  let best: Rule[] = []
  const want = page.limit + 1
  const consider = (r: Rule): void => {
    if (!keep(r) || !isBefore({ at: r.createdAt, id: r.id }, page.before)) return
    best.push(r)
    if (best.length >= want * 4) best = best.sort((a, b) => newerFirst({ at: a.createdAt, id: a.id }, { at: b.createdAt, id: b.id })).slice(0, want)
  }
  if (target === null && store.rules.rulesNewestFirst !== undefined) {
    // Newest first through the store's index: stops once the page (and one more) is kept.
    const kept: Rule[] = []
    await store.rules.rulesNewestFirst(workspaceId, kind, page.before, (r) => {
      if (keep(r)) kept.push(r)
      return kept.length < want
    })
    return { rules: kept.slice(0, page.limit), more: kept.length > page.limit }
  }
  if (kind !== 'access_rule') {
    for (const r of await store.rules.list(workspaceId, kind)) consider(r)
  } else if (target !== null) {
    for (const r of await store.rules.accessRulesOfTargets(workspaceId, [target])) if (r.target.type === target.type && r.target.value === target.value) consider(r)
  } else {
    await store.rules.accessRulesChangedSince(workspaceId, -1, now, consider)
  }
  best.sort((a, b) => newerFirst({ at: a.createdAt, id: a.id }, { at: b.createdAt, id: b.id }))
  return { rules: best.slice(0, page.limit), more: best.length > page.limit }
}

/** A page of a journal partition, newest first, `keep` deciding which entries count. */
async function journalPage (journal: JournalStore, table: JournalTable, partition: string, page: PageRequest, keep: (e: JournalEntry) => boolean = () => true): Promise<{ items: JournalEntry[], next: string | null }> {
  const items: JournalEntry[] = []
  let before = page.before
  const chunk = Math.min(500, page.limit + 1)
  for (;;) {
    const got = await journal.page(table, partition, chunk, before)
    for (const e of got) {
      if (!keep(e)) continue
      if (items.length === page.limit) return { items, next: encodeCursor({ at: items[items.length - 1]!.at, id: items[items.length - 1]!.id }) }
      items.push(e)
    }
    if (got.length < chunk) return { items, next: null }
    before = { at: got[got.length - 1]!.at, id: got[got.length - 1]!.id }
  }
}

function journalOf (store: Store): JournalStore {
  if (store.journal === undefined) throw new ThreatfeedError('TF_ERR_INTERNAL', [], { cause: new Error('store has no journal') })
  return store.journal
}

export function viewRoutes (store: Store, options: { staleMs: number }): AdminRoute[] {
  return [
    {
      method: 'get', pattern: '/v1/admin/rules', route: 'admin_rules',
      async handle (call) {
        const q = readQuery(call.query, ['workspace', 'kind', 'target', 'rule_ref', 'label', 'cursor', 'limit'], ['label'])
        const page = readPage(q)
        const kindText = q.get('kind') ?? 'access_rule'
        if (!(RULE_KINDS as readonly string[]).includes(kindText)) throw invalid([{ field: 'kind', message: `must be one of ${RULE_KINDS.join(', ')}`, value: kindText }])
        const kind = kindText as RuleKind
        const targetText = q.get('target')
        if (targetText !== null && kind !== 'access_rule') throw invalid([{ field: 'target', message: 'only access rules have a target', value: targetText }])
        const target = targetText === null ? null : parseTargetQuery(targetText)
        const ruleRef = q.get('rule_ref')
        const labels = parseLabels(q.getAll('label'))
        const w = await workspaceFor(store, call.caller, q.get('workspace') ?? undefined)
        const now = Date.now()
        const keep = (r: Rule): boolean => (ruleRef === null || r.ruleRef === ruleRef) && labels.every(([k, v]) => Object.hasOwn(r.labels, k) && String(r.labels[k]) === v)
        const { rules, more } = await findRules(store, w.id, kind, target, keep, page, now)
        const last = rules[rules.length - 1]
        sendAdmin(call.ex, 200, { items: rules.map((r) => showRule(r, now)), next_cursor: more && last !== undefined ? encodeCursor({ at: last.createdAt, id: last.id }) : null })
      },
    },
    {
      method: 'get', pattern: '/v1/admin/consumers', route: 'admin_consumers',
      async handle (call) {
        const q = readQuery(call.query, ['workspace', 'list'])
        const w = await workspaceFor(store, call.caller, q.get('workspace') ?? undefined)
        const list = q.get('list')
        // A list of another workspace, or none, is a 404 as on every other route (issue 35); '*' is the workspace feed.
        if (list !== null && list !== '*' && !(await store.lists.list(w.id)).some((l) => l.id === list)) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
        // The same view as `consumers ls --json` (feed/consumer-status.ts consumerViews).
        const rows = await consumerViews(store, w.id, Date.now(), options.staleMs, (c) => list === null || c.listId === list)
        // What the per-key bounds let go in this workspace (docs/consumers.md), every node's.
        sendAdmin(call.ex, 200, { items: rows, dropped: await store.consumers.drops(w.id) })
      },
    },
    {
      method: 'get', pattern: '/v1/admin/batches', route: 'admin_batches',
      async handle (call) {
        const q = readQuery(call.query, ['workspace', 'failed', 'cursor', 'limit'])
        const page = readPage(q)
        const failed = q.get('failed')
        if (failed !== null && failed !== 'true' && failed !== 'false') throw invalid([{ field: 'failed', message: 'must be true or false', value: failed }])
        const w = await workspaceFor(store, call.caller, q.get('workspace') ?? undefined)
        const { items, next } = await journalPage(journalOf(store), 'batch', w.id, page, failed === 'true' ? (e) => (e.data.failed as number) > 0 : undefined)
        // key_id: null on batches kept from before it was recorded.
        sendAdmin(call.ex, 200, { items: items.map((e) => ({ id: e.id, at: iso(e.at), key_id: null, ...e.data })), next_cursor: next })
      },
    },
    {
      method: 'get', pattern: '/v1/admin/feed-versions', route: 'admin_feed_versions',
      async handle (call) {
        const q = readQuery(call.query, ['workspace', 'list'])
        const w = await workspaceFor(store, call.caller, q.get('workspace') ?? undefined)
        const list = q.get('list')
        const lists = await store.lists.list(w.id)
        if (list !== null && list !== '*' && !lists.some((l) => l.id === list)) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
        const feeds = list !== null ? [list] : ['*', ...lists.map((l) => l.id)]
        const journal = journalOf(store)
        const items: Array<{ list: string, variant: string, points: unknown[] }> = []
        for (const feed of feeds) {
          const entries = await journal.page('feed_size', `${w.id}/${feed}`, JOURNAL_BOUNDS.feed_size.maxPerPartition)
          const byVariant = new Map<string, JournalEntry[]>()
          for (const e of entries) byVariant.set(e.id, [...(byVariant.get(e.id) ?? []), e])
          // at: the hour sampled; last_modified: when that variant's content last changed (its
          // Last-Modified then; null for points sampled before it was recorded).
          for (const [variant, points] of [...byVariant].sort(([a], [b]) => a.localeCompare(b))) {
            items.push({ list: feed, variant, points: points.reverse().map((e) => ({ at: iso(e.at), entries: e.data.entries, bytes: e.data.bytes, gzip_bytes: e.data.gzip_bytes, last_modified: iso(typeof e.data.last_modified === 'number' ? e.data.last_modified : null) })) })
          }
        }
        sendAdmin(call.ex, 200, { items })
      },
    },
    {
      method: 'get', pattern: '/v1/admin/audit', route: 'admin_audit',
      async handle (call) {
        const q = readQuery(call.query, ['workspace', 'cursor', 'limit'])
        const page = readPage(q)
        const requested = q.get('workspace') ?? undefined
        // A deleted workspace's log stays readable to admin:all: its deletion is in it.
        const deleted = call.caller.all && requested !== undefined ? await store.workspaces.get(requested) : null
        const w = deleted ?? await workspaceFor(store, call.caller, requested)
        const { items, next } = await journalPage(journalOf(store), 'audit', w.id, page)
        const body = items.map((e) => JSON.stringify({ at: iso(e.at), ...e.data }) + '\n').join('')
        sendAdminText(call.ex, 200, body, 'application/x-ndjson', next === null ? [] : [['X-Next-Cursor', next]])
      },
    },
  ]
}
