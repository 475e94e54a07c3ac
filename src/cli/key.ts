/** `threatfeed key create|revoke|ls` (DECISIONS §2): keys are shown once and stored only as hashes. */
import { CliError, requireOption, writeJson, type CliIo, type Command, parseVerb, NotInStoreError, writeColumns } from './command.js'
import { requireWorkspace, withStore, writeNoneFound } from './open-store.js'
import { FEED_ACTIONS, SCOPES, type ApiKey, type BouncerSetting, type FeedAction, type Scope } from '../store/types.js'
import { findList } from './feed.js'
import { generateApiKey, hashApiKey } from '../store/api-key.js'

const help = `Usage: threatfeed key <create|revoke|ls|bouncer> [options]

  create --workspace ID --scopes signals:write,feeds:read [--json]   → {"id","key"}
         the key is printed once and stored only as a SHA-256 hash; scopes: ${SCOPES.join(', ')}
         (rules:read: GET /v1/threat/explain, which shows rule metadata feeds:read must not;
         admin: /v1/admin/ for its workspace; admin:all: every workspace, made only here)
  revoke --id KEYID [--json]          refused by a running server within 1 second; revoking a
                                      revoked key changes nothing → {"id","revoked","already_revoked"}
  ls [--workspace ID] [--json]        ids, scopes and state; never the keys
  bouncer --id ID [--list ID|NAME] [--action block|allow] [--clear] [--json]
                                      what the key's CrowdSec bouncers receive (docs/bouncers.md): a
                                      list's networks of an action; without --list the workspace feed's;
                                      --clear: back to the default, the workspace feed's block networks`

export function parseScopes (raw: string): Scope[] {
  const parts = raw.split(',').map((s) => s.trim()).filter((s) => s !== '')
  if (parts.length === 0) throw new CliError(`--scopes needs at least one of ${SCOPES.join(', ')}`)
  for (const p of parts) {
    if (!(SCOPES as readonly string[]).includes(p)) throw new CliError(`unknown scope ${JSON.stringify(p)}; scopes are ${SCOPES.join(', ')}`)
  }
  return [...new Set(parts)] as Scope[]
}

function show (k: ApiKey): Record<string, unknown> {
  const out: Record<string, unknown> = { id: k.id, workspace: k.workspaceId, scopes: k.scopes, createdAt: new Date(k.createdAt).toISOString(), revoked: k.revokedAt !== null }
  if (k.bouncer !== undefined) out.bouncer = { list: k.bouncer.listId, action: k.bouncer.action }
  return out
}

/** A bouncer setting as `ls` shows it: `-` for the default. */
function bouncerText (b: BouncerSetting | undefined): string {
  return b === undefined ? '-' : `${b.listId ?? 'workspace'}:${b.action}`
}

const options = { workspace: { type: 'string' }, scopes: { type: 'string' }, id: { type: 'string' }, list: { type: 'string' }, action: { type: 'string' }, clear: { type: 'boolean' } } as const

export const keyCommand: Command = {
  name: 'key',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const parsed = parseVerb(args, io, help, options)
    if (parsed === null) return 0
    const { verb, values } = parsed
    switch (verb) {
      case 'create': {
        const workspaceId = requireOption(values, 'workspace')
        const scopes = parseScopes(requireOption(values, 'scopes'))
        const key = generateApiKey()
        const created = await withStore(io, async (s) => {
          await requireWorkspace(s, workspaceId)
          return s.keys.create({ workspaceId, hash: hashApiKey(key), scopes })
        })
        if (values.json === true) writeJson(io, { id: created.id, key })
        else io.stdout.write(`created key ${created.id} (${scopes.join(',')})\n${key}\nStore it now: it is not shown again.\n`)
        return 0
      }
      case 'revoke': {
        const id = requireOption(values, 'id')
        // Idempotent: the state is read first because the store's revoke answers false both for
        // an unknown key and for one revoked before (a race between the two reads the same).
        const outcome = await withStore(io, async (s) => {
          const key = await s.keys.get(id)
          if (key === null) return 'unknown'
          if (key.revokedAt !== null) return 'already revoked'
          return await s.keys.revoke(id) ? 'revoked' : 'already revoked'
        })
        if (outcome === 'unknown') throw new NotInStoreError(`no API key with id ${id}`)
        const already = outcome === 'already revoked'
        if (values.json === true) writeJson(io, { id, revoked: true, already_revoked: already })
        else io.stdout.write(already ? `key ${id} was already revoked\n` : `revoked key ${id}\n`)
        return 0
      }
      case 'ls': {
        const keys = await withStore(io, (s) => s.keys.list(values.workspace))
        if (values.json === true) writeJson(io, keys.map(show))
        else if (keys.length === 0) writeNoneFound(io, values.workspace === undefined ? 'API keys' : `API keys of workspace ${values.workspace}`)
        else writeColumns(io, ['ID', 'WORKSPACE', 'STATE', 'CREATED', 'SCOPES', 'BOUNCER'], keys.map((k) => [k.id, k.workspaceId, k.revokedAt === null ? 'active' : 'revoked', new Date(k.createdAt).toISOString(), k.scopes.join(','), bouncerText(k.bouncer)]))
        return 0
      }
      case 'bouncer': {
        const id = requireOption(values, 'id')
        const clear = values.clear === true
        if (clear && (values.list !== undefined || values.action !== undefined)) throw new CliError('--clear takes neither --list nor --action')
        const action = values.action ?? 'block'
        if (!(FEED_ACTIONS as readonly string[]).includes(action)) throw new CliError(`--action must be one of ${FEED_ACTIONS.join(', ')}, got ${JSON.stringify(action)}`)
        const updated = await withStore(io, async (s) => {
          const key = await s.keys.get(id)
          if (key === null || key.revokedAt !== null) throw new NotInStoreError(`no live API key with id ${id}`)
          const listId = values.list === undefined ? null : (await findList(s, key.workspaceId, values.list)).id
          const next = await s.keys.setBouncer(id, clear ? null : { listId, action: action as FeedAction })
          if (next === null) throw new NotInStoreError(`no live API key with id ${id}`)
          return next
        })
        if (values.json === true) writeJson(io, show(updated))
        else io.stdout.write(`key ${id}: bouncers receive ${updated.bouncer === undefined ? 'the workspace feed\'s block networks' : `the ${updated.bouncer.action} networks of ${updated.bouncer.listId === null ? 'the workspace feed' : `list ${updated.bouncer.listId}`}`}\n`)
        return 0
      }
      default:
        throw new CliError(`unknown key command ${JSON.stringify(verb)}; see threatfeed key --help`)
    }
  },
}
