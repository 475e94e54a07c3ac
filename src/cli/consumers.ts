/**
 * `threatfeed consumers ls`: who polls the feeds (issue 20), from the store every server flushes
 * its counts to, stale ones first.
 */
import { loadConfig, parseDuration } from '../config.js'
import { CONSUMER_FORGET_MS, consumerStatus, currentVersions, versionId, type ConsumerStatus } from '../feed/consumer-status.js'
import type { FeedConsumer, Store } from '../store/types.js'
import { CliError, parseVerb, writeJson, type CliIo, type Command } from './command.js'
import { requireWorkspace, storeLocation, withStore } from './open-store.js'

const help = `Usage: threatfeed consumers ls [--workspace ID] [--stale DURATION] [--json]

  ls    every appliance that polled a feed in the last 30 days, stale ones first: one line per
        key, client address, User-Agent, ?client= name, list and variant, with when it was last
        seen, its last status, its last 200, polls per hour, whether it holds the current
        version, and when it was first seen
        --workspace ID      only that workspace's consumers
        --stale DURATION    silence that makes a consumer stale (default THREATFEED_CONSUMER_STALE,
                            15m); a consumer polling less often is stale after three of its
                            median intervals, and one whose last three polls got 4xx is stale
        --json: one JSON array of {id, workspace, key, address, userAgent, client, list,
        listName, variant, state, staleReason, lastSeen, lastStatus, last200, pollsPerHour,
        medianIntervalSeconds, version, versionsBehind, firstSeen, polls}
        The table ends with what the per-key bound (THREATFEED_CONSUMERS_PER_KEY) let go, if
        anything: consumers evicted from a server's memory, refused, and removed from the store.`

const options = {
  workspace: { type: 'string' },
  stale: { type: 'string' },
} as const

interface Row {
  readonly c: FeedConsumer
  readonly s: ConsumerStatus
  readonly listName: string | null
}

const iso = (ms: number | null): string | null => ms === null ? null : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')

/** `current`, `behind` (with a count when one is known), or `unknown`. */
function versionOf (s: ConsumerStatus): string {
  if (s.behind === null) return 'unknown'
  if (!s.behind.behind) return 'current'
  return s.behind.versions === null ? 'behind' : `behind ${s.behind.versions}`
}

function toJson ({ c, s, listName }: Row): Record<string, unknown> {
  return {
    id: c.id,
    workspace: c.workspaceId,
    key: c.keyId,
    address: c.address,
    userAgent: c.userAgent,
    client: c.client === '' ? null : c.client,
    list: c.listId,
    listName,
    variant: c.variant,
    state: s.stale ? 'stale' : 'fresh',
    staleReason: s.reason,
    lastSeen: iso(c.lastSeen),
    lastStatus: c.last.status,
    last200: iso(c.last200At),
    pollsPerHour: s.pollsPerHour,
    medianIntervalSeconds: s.medianIntervalMs === null ? null : s.medianIntervalMs / 1000,
    version: s.behind === null ? 'unknown' : s.behind.behind ? 'behind' : 'current',
    versionsBehind: s.behind?.versions ?? null,
    firstSeen: iso(c.firstSeen),
    polls: { total: c.polls, ok: c.ok, notModified: c.notModified, clientErrors: c.clientErrors, serverErrors: c.serverErrors },
  }
}

const HEADINGS = ['STATE', 'ADDRESS', 'CLIENT', 'USER-AGENT', 'LIST', 'VARIANT', 'LAST SEEN', 'LAST', 'LAST 200', 'POLLS/H', 'VERSION', 'FIRST SEEN', 'KEY'] as const

function toCells ({ c, s, listName }: Row): string[] {
  return [
    s.stale ? `stale (${s.reason})` : 'fresh',
    c.address,
    c.client === '' ? '-' : c.client,
    c.userAgent === '' ? '-' : JSON.stringify(c.userAgent).slice(1, -1),
    listName ?? c.listId,
    c.variant === '' ? '-' : c.variant,
    iso(c.lastSeen)!,
    String(c.last.status),
    iso(c.last200At) ?? '-',
    s.pollsPerHour === null ? '-' : String(s.pollsPerHour),
    versionOf(s),
    iso(c.firstSeen)!,
    c.keyId,
  ]
}

function writeTable (io: CliIo, rows: readonly Row[]): void {
  if (rows.length === 0) {
    io.stdout.write(`no feed consumers seen in the last 30 days in ${storeLocation(loadConfig(io.env))}\n`)
    return
  }
  const lines = [[...HEADINGS], ...rows.map(toCells)]
  const widths = HEADINGS.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)))
  for (const l of lines) io.stdout.write(l.map((cell, i) => i === l.length - 1 ? cell : cell.padEnd(widths[i]!)).join('  ') + '\n')
}

/** The consumers with their status at `now`, stale first, then the longest silent first. */
async function readRows (store: Store, workspaceId: string | undefined, staleMs: number, now: number): Promise<Row[]> {
  // Records a server has not forgotten yet (none ran for a while) are left out all the same.
  const consumers = (await store.consumers.list(workspaceId)).filter((c) => now - c.lastSeen <= CONSUMER_FORGET_MS)
  const versions = await currentVersions(store, consumers)
  const names = new Map<string, string | null>()
  for (const c of consumers) {
    if (c.listId === '*' || names.has(c.listId)) continue
    const list = await store.lists.get(c.listId)
    names.set(c.listId, list === null ? null : list.name)
  }
  const rows = consumers.map((c) => ({
    c,
    s: consumerStatus(c, versions.get(versionId(c)) ?? null, now, staleMs),
    listName: c.listId === '*' ? '(workspace feed)' : names.get(c.listId) ?? null,
  }))
  return rows.sort((a, b) => Number(b.s.stale) - Number(a.s.stale) || a.c.lastSeen - b.c.lastSeen || (a.c.id < b.c.id ? -1 : 1))
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
      return [await readRows(store, values.workspace, staleMs, Date.now()), await store.consumers.drops(values.workspace)] as const
    })
    if (values.json === true) writeJson(io, rows.map(toJson))
    else {
      writeTable(io, rows)
      if (drops.evicted + drops.refused + drops.removed > 0) {
        io.stdout.write(`dropped by the consumer bounds: ${drops.evicted} evicted from memory, ${drops.refused} refused, ${drops.removed} removed from the store\n`)
      }
    }
    return 0
  },
}
