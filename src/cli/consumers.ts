/**
 * `threatfeed consumers ls`: who polls the feeds (issue 20), from the store every server flushes
 * its counts to, stale ones first.
 */
import { loadConfig, parseDuration } from '../config.js'
import { consumerViews, type ConsumerView } from '../feed/consumer-status.js'
import { CliError, parseVerb, writeJson, type CliIo, type Command } from './command.js'
import { requireWorkspace, storeLocation, withStore } from './open-store.js'

const help = `Usage: threatfeed consumers ls [--workspace ID] [--stale DURATION] [--json]

  ls    every appliance that polled a feed in the last 30 days, stale ones first, then
        behind, then the most recently seen: one line per
        key, client address, User-Agent, ?client= name, list and variant, with when it was last
        seen, its last status, its last 200, polls per hour, whether it holds the current
        version, and when it was first seen
        --workspace ID      only that workspace's consumers
        --stale DURATION    silence that makes a consumer stale (default THREATFEED_CONSUMER_STALE,
                            15m); a consumer polling less often is stale after three of its
                            median intervals, and one whose last three polls got 4xx is stale
        --json: the items of GET /v1/admin/consumers, field for field: one JSON array of
        {id, workspace, key_id, address, user_agent, client, list, list_name, variant, stale,
        stale_reason, first_seen, last_seen, last_status, last_200, polls_per_hour,
        median_interval_seconds, behind, versions_behind, polls: {total, ok, not_modified,
        client_errors, server_errors}}
        The table ends with what the per-key bound (THREATFEED_CONSUMERS_PER_KEY) let go, if
        anything: consumers evicted from a server's memory, refused, and removed from the store.`

const options = {
  workspace: { type: 'string' },
  stale: { type: 'string' },
} as const

/** `current`, `behind` (with a count when one is known), or `unknown`. */
function versionOf (v: ConsumerView): string {
  if (v.behind === null) return 'unknown'
  if (!v.behind) return 'current'
  return v.versions_behind === null ? 'behind' : `behind ${v.versions_behind}`
}

const HEADINGS = ['STATE', 'ADDRESS', 'CLIENT', 'USER-AGENT', 'LIST', 'VARIANT', 'LAST SEEN', 'LAST', 'LAST 200', 'POLLS/H', 'VERSION', 'FIRST SEEN', 'KEY'] as const

function toCells (v: ConsumerView): string[] {
  return [
    v.stale ? `stale (${v.stale_reason})` : 'fresh',
    v.address,
    v.client ?? '-',
    v.user_agent === '' ? '-' : JSON.stringify(v.user_agent).slice(1, -1),
    v.list === '*' ? '(workspace feed)' : v.list_name ?? v.list,
    v.variant === '' ? '-' : v.variant,
    v.last_seen,
    String(v.last_status),
    v.last_200 ?? '-',
    v.polls_per_hour === null ? '-' : String(v.polls_per_hour),
    versionOf(v),
    v.first_seen,
    v.key_id,
  ]
}

function writeTable (io: CliIo, rows: readonly ConsumerView[]): void {
  if (rows.length === 0) {
    io.stdout.write(`no feed consumers seen in the last 30 days in ${storeLocation(loadConfig(io.env))}\n`)
    return
  }
  const lines = [[...HEADINGS], ...rows.map(toCells)]
  const widths = HEADINGS.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)))
  for (const l of lines) io.stdout.write(l.map((cell, i) => i === l.length - 1 ? cell : cell.padEnd(widths[i]!)).join('  ') + '\n')
}

export const consumersCommand: Command = {
  name: 'consumers',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const parsed = parseVerb(args, io, help, options)
    if (parsed === null) return 0
    const { verb, values } = parsed
    if (verb !== 'ls') throw new CliError(`unknown consumers command ${JSON.stringify(verb)}; see threatfeed consumers --help`)
    let staleMs = loadConfig(io.env).consumerStaleMs
    if (values.stale !== undefined) {
      const ms = parseDuration(values.stale)
      if (ms === null || ms < 1000) throw new CliError(`--stale must be a duration of at least 1s such as 90s, 15m, 12h or 7d, got ${JSON.stringify(values.stale)}`)
      staleMs = ms
    }
    const [rows, drops] = await withStore(io, async (store) => {
      if (values.workspace !== undefined) await requireWorkspace(store, values.workspace)
      return [await consumerViews(store, values.workspace, Date.now(), staleMs), await store.consumers.drops(values.workspace)] as const
    })
    if (values.json === true) writeJson(io, rows)
    else {
      writeTable(io, rows)
      if (drops.evicted + drops.refused + drops.removed > 0) {
        io.stdout.write(`dropped by the consumer bounds: ${drops.evicted} evicted from memory, ${drops.refused} refused, ${drops.removed} removed from the store\n`)
      }
    }
    return 0
  },
}
