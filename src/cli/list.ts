/** `threatfeed list create|update|delete|show|ls` (DECISIONS §4): named feeds with stored defaults and a label selector. */
import { CliError, requireOption, writeJson, type CliIo, type Command, parseVerb, NotInStoreError, writeColumns } from './command.js'
import { checkText, requireWorkspace, withStore, writeNoneFound } from './open-store.js'
import { GUARD_HELP, GUARD_OPTIONS, mergeGuards, readGuards } from './guard-flags.js'
import { MAX_SHARDS } from '../feed/render/shard-networks.js'
import { CONFIDENCES, FAMILIES, FEED_ACTIONS, FORMATS, SEVERITIES, type AccessList, type ListDefaults, type Store } from '../store/types.js'
import { lastModifiedOf, showList } from '../feed/admin-shapes.js'

const help = `Usage: threatfeed list <create|update|delete|show|accept|ls> [options]

  create --workspace ID --name NAME [--description TEXT] [--format F] [--family F]
         [--action A] [--max-entries N] [--confidence C] [--severity S]
         [--shards N] [--select key=value]... [--json]            → {"id","name"}
         [--min-entries N] [--max-shrink-pct P] [--max-grow-pct P] [--reject-special]
         [--guard-mode hold|drop] [--min-prefix-v4 L] [--min-prefix-v6 L]
  update --id ID [the options of create but the workspace] [--clear-select] [--clear-guards] [--json]
  delete --id ID [--json]
  show --id ID [--json]                       as GET /v1/admin/lists/ID answers: with the build a guard
                                              holds, if any, and its diff
  accept --id ID [--digest D] [--json]        publish the held build (D: only if it is that one)
  ls --workspace ID [--json]                  --json: the items of GET /v1/admin/lists

  --format      ${FORMATS.join(' | ')}
  --family      ${FAMILIES.join(' | ')}
  --action      ${FEED_ACTIONS.join(' | ')}
  --max-entries entry cap of the list's feeds (default 131072)
  --confidence  ${CONFIDENCES.join(' | ')}      default for dialect_b rows
  --severity    ${SEVERITIES.join(' | ')}
${GUARD_HELP}
  --shards      shard count N (1..${MAX_SHARDS}) for requests that send shard=I without of=N
  --select      repeatable; the list publishes the workspace's access rules whose labels
                hold every key=value (no --select: all of them)`

/** Feed entry caps above this would not fit a response anyone could use. */
const MAX_ENTRIES_CEILING = 100_000_000

const options = {
  workspace: { type: 'string' },
  id: { type: 'string' },
  name: { type: 'string' },
  description: { type: 'string' },
  format: { type: 'string' },
  family: { type: 'string' },
  action: { type: 'string' },
  'max-entries': { type: 'string' },
  shards: { type: 'string' },
  confidence: { type: 'string' },
  severity: { type: 'string' },
  select: { type: 'string', multiple: true },
  'clear-select': { type: 'boolean' },
  digest: { type: 'string' },
  ...GUARD_OPTIONS,
} as const

function oneOf<T extends string> (option: string, values: readonly T[], v: string | undefined): T | undefined {
  if (v === undefined) return undefined
  if (!(values as readonly string[]).includes(v)) throw new CliError(`--${option} must be one of ${values.join(', ')}, got ${JSON.stringify(v)}`)
  return v as T
}

function wholeNumber (option: string, v: string | undefined, ceiling: number): number | undefined {
  if (v === undefined) return undefined
  const n = /^\d+$/.test(v) ? Number(v) : NaN
  if (!Number.isSafeInteger(n) || n < 1 || n > ceiling) throw new CliError(`--${option} must be a whole number from 1 to ${ceiling}, got ${JSON.stringify(v)}`)
  return n
}

/** `key=value` pairs; keys follow the label rules of DECISIONS §3 (no `$` prefix, no prototype keys). */
export function parseSelector (pairs: readonly string[]): Record<string, string> {
  const out: Record<string, string> = Object.create(null) as Record<string, string>
  for (const p of pairs) {
    const eq = p.indexOf('=')
    if (eq <= 0) throw new CliError(`--select takes key=value, got ${JSON.stringify(p)}`)
    const key = checkText('select', p.slice(0, eq), 128)
    const value = checkText('select', p.slice(eq + 1), 1024)
    if (key.startsWith('$') || key === '__proto__' || key === 'constructor' || key === 'prototype') throw new CliError(`--select key ${JSON.stringify(key)} is not allowed`)
    if (key in out && out[key] !== value) throw new CliError(`--select gives ${key} twice with different values`)
    out[key] = value
  }
  return { ...out }
}

function readDefaults (values: Record<string, unknown>): ListDefaults {
  const d: ListDefaults = {}
  const format = oneOf('format', FORMATS, values.format as string | undefined)
  const family = oneOf('family', FAMILIES, values.family as string | undefined)
  const action = oneOf('action', FEED_ACTIONS, values.action as string | undefined)
  const max = wholeNumber('max-entries', values['max-entries'] as string | undefined, MAX_ENTRIES_CEILING)
  const shards = wholeNumber('shards', values.shards as string | undefined, MAX_SHARDS)
  const confidence = oneOf('confidence', CONFIDENCES, values.confidence as string | undefined)
  const severity = oneOf('severity', SEVERITIES, values.severity as string | undefined)
  if (format !== undefined) d.format = format
  if (family !== undefined) d.family = family
  if (action !== undefined) d.action = action
  if (max !== undefined) d.maxEntries = max
  if (confidence !== undefined) d.confidence = confidence
  if (severity !== undefined) d.severity = severity
  if (shards !== undefined) d.shards = shards
  if (d.format === 'nftables' && d.family === 'both') throw new CliError('--format nftables needs --family v4 or v6 (an nftables set holds one family)')
  return d
}

/** A list as GET /v1/admin/lists/ID answers it (feed/admin-shapes.ts): one shape for both. */
async function showStored (store: Store, l: AccessList): Promise<Record<string, unknown>> {
  return showList(l, await lastModifiedOf(store.feedVersions, l.workspaceId, l.id, l.publishState))
}

export const listCommand: Command = {
  name: 'list',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const parsed = parseVerb(args, io, help, options)
    if (parsed === null) return 0
    const { verb, values } = parsed
    const json = values.json === true
    switch (verb) {
      case 'create': {
        const workspaceId = requireOption(values, 'workspace')
        const name = checkText('name', requireOption(values, 'name'))
        const description = checkText('description', values.description ?? '', 1000)
        const defaults = readDefaults(values)
        const guards = mergeGuards(undefined, readGuards(values))
        if (guards !== undefined) defaults.guards = guards
        const selector = parseSelector(values.select ?? [])
        const l = await withStore(io, async (s) => {
          await requireWorkspace(s, workspaceId)
          return s.lists.create({ workspaceId, name, description, defaults, selector })
        })
        if (json) writeJson(io, { id: l.id, name: l.name })
        else io.stdout.write(`created list ${l.id} (${l.name})\n`)
        return 0
      }
      case 'update': {
        const id = requireOption(values, 'id')
        if (values.workspace !== undefined) throw new CliError('a list cannot move to another workspace')
        const patch: Partial<Pick<AccessList, 'name' | 'description' | 'defaults' | 'selector'>> = {}
        if (values.name !== undefined) patch.name = checkText('name', values.name)
        if (values.description !== undefined) patch.description = checkText('description', values.description, 1000)
        const defaults = readDefaults(values)
        const guardUpdate = readGuards(values)
        const l = await withStore(io, async (s) => {
          const current = await s.lists.get(id)
          if (current === null) throw new NotInStoreError(`no list with id ${id}`)
          if (Object.keys(defaults).length > 0 || guardUpdate.clear || Object.keys(guardUpdate.guards).length > 0) {
            patch.defaults = { ...current.defaults, ...defaults }
            const guards = mergeGuards(current.defaults.guards, guardUpdate)
            if (guards === undefined) delete patch.defaults.guards
            else patch.defaults.guards = guards
            if (patch.defaults.format === 'nftables' && patch.defaults.family === 'both') throw new CliError('--format nftables needs --family v4 or v6 (an nftables set holds one family)')
          }
          if (values['clear-select'] === true) patch.selector = {}
          if (values.select !== undefined) patch.selector = { ...(patch.selector ?? current.selector), ...parseSelector(values.select) }
          if (Object.keys(patch).length === 0) throw new CliError('nothing to update')
          return s.lists.update(id, patch)
        })
        if (l === null) throw new NotInStoreError(`no list with id ${id}`)
        if (json) writeJson(io, await withStore(io, (s) => showStored(s, l)))
        else io.stdout.write(`updated list ${l.id} (${l.name})\n`)
        return 0
      }
      case 'delete': {
        const id = requireOption(values, 'id')
        const ok = await withStore(io, (s) => s.lists.delete(id))
        if (!ok) throw new NotInStoreError(`no list with id ${id}`)
        if (json) writeJson(io, { id, deleted: true })
        else io.stdout.write(`deleted list ${id}\n`)
        return 0
      }
      case 'show': {
        const id = requireOption(values, 'id')
        const shown = await withStore(io, async (s) => {
          const l = await s.lists.get(id)
          return l === null ? null : await showStored(s, l)
        })
        if (shown === null) throw new NotInStoreError(`no list with id ${id}`)
        if (json) writeJson(io, shown)
        else io.stdout.write(JSON.stringify(shown, null, 2) + '\n')
        return 0
      }
      case 'accept': {
        const id = requireOption(values, 'id')
        const { digest, already } = await withStore(io, async (s) => {
          const current = await s.lists.get(id)
          if (current === null) throw new NotInStoreError(`no list with id ${id}`)
          const held = current.publishState?.held ?? null
          const accepted = current.defaults.guards?.accepted ?? null
          // Run twice (or after the server published it): said so, not an error.
          if (accepted !== null && (held === null || held.digest === accepted) && (values.digest === undefined || values.digest === accepted)) {
            return { digest: accepted, already: true }
          }
          if (held === null) throw new CliError(`list ${id} has no held build`, 1)
          if (values.digest !== undefined && values.digest !== held.digest) throw new CliError(`the held build of list ${id} is ${held.digest}, not ${values.digest}; nothing accepted`, 1)
          // Recorded by digest: every node publishes this build, and a newer one is judged anew.
          await s.lists.update(id, { defaults: { ...current.defaults, guards: { ...current.defaults.guards, accepted: held.digest } } })
          return { digest: held.digest, already: false }
        })
        if (json) writeJson(io, { id, accepted: digest, ...(already ? { already_accepted: true } : {}) })
        else if (already) io.stdout.write(`build ${digest} of list ${id} was already accepted; nothing to do\n`)
        else io.stdout.write(`accepted build ${digest} of list ${id}; the server publishes it within a second\n`)
        return 0
      }
      case 'ls': {
        const workspaceId = requireOption(values, 'workspace')
        const [lists, shown] = await withStore(io, async (s) => {
          await requireWorkspace(s, workspaceId)
          const all = await s.lists.list(workspaceId)
          return [all, await Promise.all(all.map((l) => showStored(s, l)))] as const
        })
        if (json) writeJson(io, shown)
        else if (lists.length === 0) writeNoneFound(io, `lists in workspace ${workspaceId}`)
        else writeColumns(io, ['ID', 'NAME'], lists.map((l) => [l.id, l.name]))
        return 0
      }
      default:
        throw new CliError(`unknown list command ${JSON.stringify(verb)}; see threatfeed list --help`)
    }
  },
}
