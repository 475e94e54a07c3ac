/** `threatfeed workspace create|update|delete|ls` (DECISIONS §2). */
import { CliError, requireOption, writeJson, type CliIo, type Command, parseVerb, NotInStoreError, writeColumns } from './command.js'
import { checkText, withStore, writeNoneFound } from './open-store.js'
import { GUARD_HELP, GUARD_OPTIONS, mergeGuards, readGuards } from './guard-flags.js'
import { SUBSCRIPTIONS, type GuardSettings, type Subscription, type Workspace } from '../store/types.js'

const help = `Usage: threatfeed workspace <create|update|delete|ls> [options]

  create --name NAME [--subscription active|inactive] [--json]   → {"id","name"}
  update --workspace ID [--name NAME] [--subscription active|inactive] [--json]
         [--min-entries N] [--max-shrink-pct P] [--max-grow-pct P] [--reject-special]
         [--guard-mode hold|drop] [--min-prefix-v4 L] [--min-prefix-v6 L] [--clear-guards]
  delete --workspace ID [--json]      keys of a deleted workspace answer 401
  ls [--json]

Changes reach a running server within 1 second. The publish guards are those of the
workspace feed (/v1/threat/feeds), as \`list create\` sets them for a list:

${GUARD_HELP}`

function subscription (v: unknown): Subscription | undefined {
  if (v === undefined) return undefined
  if (!(SUBSCRIPTIONS as readonly unknown[]).includes(v)) throw new CliError(`--subscription must be one of ${SUBSCRIPTIONS.join(', ')}, got ${JSON.stringify(v)}`)
  return v as Subscription
}

function show (w: Workspace): Record<string, unknown> {
  const out: Record<string, unknown> = { id: w.id, name: w.name, subscription: w.subscription, createdAt: new Date(w.createdAt).toISOString() }
  if (w.feedGuards !== undefined) out.feedGuards = w.feedGuards
  return out
}

const options = {
  name: { type: 'string' },
  subscription: { type: 'string' },
  workspace: { type: 'string' },
  ...GUARD_OPTIONS,
} as const

export const workspaceCommand: Command = {
  name: 'workspace',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const parsed = parseVerb(args, io, help, options)
    if (parsed === null) return 0
    const { verb, values } = parsed
    switch (verb) {
      case 'create': {
        const name = checkText('name', requireOption(values, 'name'))
        const sub = subscription(values.subscription) ?? 'active'
        // The first command of an installation: it alone creates the store.
        const w = await withStore(io, (s) => s.workspaces.create({ name, subscription: sub }), { create: true })
        if (values.json === true) writeJson(io, { id: w.id, name: w.name })
        else io.stdout.write(`created workspace ${w.id} (${w.name})\n`)
        return 0
      }
      case 'update': {
        const id = requireOption(values, 'workspace')
        const patch: { name?: string, subscription?: Subscription, feedGuards?: GuardSettings | null } = {}
        if (values.name !== undefined) patch.name = checkText('name', values.name)
        const sub = subscription(values.subscription)
        if (sub !== undefined) patch.subscription = sub
        const guardUpdate = readGuards(values)
        const guarding = guardUpdate.clear || Object.keys(guardUpdate.guards).length > 0
        if (Object.keys(patch).length === 0 && !guarding) throw new CliError('nothing to update: give --name, --subscription or a guard option')
        const w = await withStore(io, async (s) => {
          if (guarding) {
            const current = await s.workspaces.get(id)
            if (current === null || current.deletedAt !== null) return null
            patch.feedGuards = mergeGuards(current.feedGuards, guardUpdate) ?? null
          }
          return s.workspaces.update(id, patch)
        })
        if (w === null || w.deletedAt !== null) throw new NotInStoreError(`no workspace with id ${id}`)
        if (values.json === true) writeJson(io, show(w))
        else io.stdout.write(`updated workspace ${w.id}: subscription ${w.subscription}\n`)
        return 0
      }
      case 'delete': {
        const id = requireOption(values, 'workspace')
        const ok = await withStore(io, (s) => s.workspaces.delete(id))
        if (!ok) throw new NotInStoreError(`no workspace with id ${id}`)
        if (values.json === true) writeJson(io, { id, deleted: true })
        else io.stdout.write(`deleted workspace ${id}\n`)
        return 0
      }
      case 'ls': {
        const all = await withStore(io, (s) => s.workspaces.list())
        const live = all.filter((w) => w.deletedAt === null)
        if (values.json === true) writeJson(io, live.map(show))
        else if (live.length === 0) writeNoneFound(io, 'workspaces')
        else writeColumns(io, ['ID', 'SUBSCRIPTION', 'NAME'], live.map((w) => [w.id, w.subscription, w.name]))
        return 0
      }
      default:
        throw new CliError(`unknown workspace command ${JSON.stringify(verb)}; see threatfeed workspace --help`)
    }
  },
}
