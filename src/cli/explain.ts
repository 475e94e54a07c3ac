/**
 * `threatfeed explain ADDR --workspace ID [--list L] [--json]`: why an address is, or is not, in
 * the workspace's feeds — the same explanation as GET /v1/threat/explain (src/feed/explain.ts),
 * worked out from the store the way `feed get` builds a feed: each feed's snapshot is built
 * in-process from the stored rules, so it shows what a server that has caught up serves.
 */
import { CliError, parseOptions, requireOption, writeHelp, writeJson, type CliIo, type Command } from './command.js'
import { requireWorkspace, withStore } from './open-store.js'
import { findList } from './feed.js'
import { ThreatfeedError } from '../errors.js'
import { explainAddress, feedHoldOf, type ExplainedAction, type ExplainedFeed, type ExplainedRule, type Explanation, type FeedHold } from '../feed/explain.js'
import { buildAsServed } from '../feed/guards-offline.js'
import { parseExplainAddress, type ExplainAddress } from '../feed/explain-lookup.js'
import { inProcessTasks } from '../feed/in-process-tasks.js'
import { LastModifiedKeeper } from '../feed/last-modified.js'
import { toRuleTable } from '../feed/rule-table.js'
import { resolveGeoPaths } from '../geo/default-db.js'
import { loadGeoIndex } from '../geo/load.js'
import { GeoLookup } from '../geo/lookup.js'
import type { AccessList } from '../store/types.js'

const help = `Usage: threatfeed explain ADDR --workspace ID [--list NAME|UUID] [--json]

Says why ADDR is, or is not, in the workspace's feeds: for the workspace feed and every list (or
only --list), and for each action, whether it is published, the network of each format that holds
it (dialect_b per confidence/severity group), every rule that puts it there (target, rule_ref,
labels, confidence, severity, created, updated, expires, stream seq; for a country or ASN rule
the database record that expands to it), and when it is not published, why: no rule covers it,
its rule lapsed (also after the sweep removed it), an allow rule carves it out, the list's
selector does not select the rule, the family is not published, or the variant is over its cap.

Works from the store like \`feed get\`: each feed is built here from the stored rules, as a server
that has caught up serves it, publish guards included: a feed the server holds back is explained
from the last published rules it serves, and says since when and by which guard it is held. The
server's answer is GET /v1/threat/explain (scope rules:read).

  --json   the explanation as one JSON document (the HTTP answer's shape)`

const options = {
  workspace: { type: 'string' },
  list: { type: 'string' },
} as const

function parseAddress (raw: string | undefined): ExplainAddress {
  if (raw === undefined) throw new CliError('an address is required: threatfeed explain ADDR --workspace ID')
  try {
    return parseExplainAddress(raw)
  } catch (e) {
    if (e instanceof ThreatfeedError) throw new CliError(e.message)
    throw e
  }
}

export const explainCommand: Command = {
  name: 'explain',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const { values, positionals } = parseOptions(args, options, true)
    if (values.help === true || args.length === 0) return writeHelp(io, help)
    if (positionals.length > 1) throw new CliError(`one address at a time; got ${positionals.length}`)
    const address = parseAddress(positionals[0])
    const workspaceId = requireOption(values, 'workspace')
    return withStore(io, async (store) => {
      const workspace = await requireWorkspace(store, workspaceId)
      const feeds: Array<AccessList | null> = values.list !== undefined
        ? [await findList(store, workspaceId, values.list)]
        : [null, ...(await store.lists.list(workspaceId)).sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id))]
      const now = Date.now()
      const paths = await resolveGeoPaths(io.env, { progress: io.isTTY, stream: io.stderr })
      const [rules, index] = await Promise.all([store.rules.listAccessRules(workspaceId, now), loadGeoIndex(paths)])
      const table = toRuleTable(rules)
      const lastModified = new LastModifiedKeeper(store.feedVersions, { timeoutMs: 10_000 })
      // Built as the server builds them, guards included (the hold the server stored): a held
      // feed is explained from what it serves, and says it is held.
      const holds = new Map<string, FeedHold>()
      const explanation = await explainAddress({
        rules: store.rules,
        geo: { index, lookup: GeoLookup.open(paths) },
        snapshotOf: async (list) => {
          const built = await buildAsServed({ workspaceId, workspaceName: workspace.name, list }, table, workspace.feedGuards, store.feedVersions, { tasks: inProcessTasks(index), geo: index, lastModified, now })
          if (built.publish?.held != null) holds.set(list?.id ?? '*', feedHoldOf(built.publish.held))
          return built.snapshot
        },
        heldBy: (_workspace, feedId) => holds.get(feedId),
      }, workspace, feeds, address, now)
      if (values.json === true) writeJson(io, explanation)
      else io.stdout.write(formatExplanation(explanation))
      return 0
    })
  },
}

function ruleLine (r: ExplainedRule): string {
  const labels = Object.keys(r.labels).length === 0 ? '' : ` labels ${JSON.stringify(r.labels)}`
  const head = `${r.action} ${r.target.type} ${r.target.value}${r.rule_ref !== null ? ` rule_ref ${r.rule_ref}` : ''}`
  const times = `created ${r.created_at}, updated ${r.updated_at}, expires ${r.expires_at ?? 'never'}, stream seq ${r.stream_seq}`
  let line = `    rule: ${head}, confidence ${r.confidence ?? '-'}, severity ${r.severity ?? '-'}${labels}; ${times}\n`
  if (r.expansion !== undefined) {
    const e = r.expansion
    line += `      expansion: ${e.country ?? e.asn} — record ${e.network} in ${e.database}${e.database_type !== null ? ` (${e.database_type})` : ''}\n`
  }
  return line
}

function actionLines (name: string, a: ExplainedAction): string {
  let out = `  ${name}: ${a.published ? 'published' : 'not published'} (default ${a.default.format}, ${a.default.family})\n`
  // plain, dialect_a and nftables print the same network (the feed's total); dialect_b its rows.
  const network = a.formats.find((f) => f.network != null)?.network
  if (network != null) out += `    network: ${network} (plain, dialect_a, nftables)\n`
  const rows = a.formats.find((f) => f.rows !== undefined && f.rows.length > 0)?.rows ?? []
  if (rows.length > 0) out += `    dialect_b: ${rows.map((r) => r.row).join(' | ')}\n`
  const over = a.formats.filter((f) => f.status === 413)
  if (over.length > 0) out += `    413 (limit ${over[0]!.limit}): ${over.map((f) => `${f.format} ${f.family} ${f.entries}`).join(', ')} entries\n`
  for (const r of a.rules) out += ruleLine(r)
  for (const r of a.reasons) out += `    why: ${r.message}\n`
  return out
}

function feedLines (f: ExplainedFeed): string {
  const title = f.list === null
    ? `workspace feed "${f.name}"`
    : `list "${f.list.name}" (${f.list.id})${Object.keys(f.list.selector).length > 0 ? ` selecting ${Object.entries(f.list.selector).map(([k, v]) => `${k}=${v}`).join(', ')}` : ''}`
  let out = f.built_at === null ? `${title}, not built\n` : `${title}, built ${f.built_at}\n`
  if (f.held !== undefined) out += `  held back by the server since ${f.held.since}: ${f.held.reason}\n`
  return out + actionLines('block', f.actions.block) + actionLines('allow', f.actions.allow)
}

/** The explanation as text: one block per feed, one line per format, rule and reason. */
export function formatExplanation (e: Explanation): string {
  const geo: string[] = []
  if (e.geo.country !== null) geo.push(`country ${e.geo.country.code} (record ${e.geo.country.network} in ${e.geo.country.database})`)
  if (e.geo.asn !== null) geo.push(`${e.geo.asn.asn}${e.geo.asn.organization !== null ? ` ${e.geo.asn.organization}` : ''} (record ${e.geo.asn.network} in ${e.geo.asn.database})`)
  let out = `${e.ip} (${e.family}) in workspace "${e.workspace.name}" (${e.workspace.id}) at ${e.at}\n`
  out += `geo: ${geo.length > 0 ? geo.join('; ') : 'in neither database'}\n`
  for (const f of e.feeds) out += '\n' + feedLines(f)
  return out
}
