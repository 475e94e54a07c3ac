/** `threatfeed rules ls`: the rules a workspace holds, as the stream consumer applied them. */
import { CliError, requireOption, writeJson, type CliIo, type Command, parseVerb, NotInStoreError } from './command.js'
import { withStore, writeNoneFound } from './open-store.js'
import { RULE_KINDS, type Rule, type RuleKind } from '../store/types.js'

const help = `Usage: threatfeed rules ls --workspace ID [--kind K] [--all] [--json]

Lists the rules of a workspace, by kind (default: every kind).

  --kind   ${RULE_KINDS.join(' | ')}
  --all    also show rules that have lapsed but are not purged yet
  --json   one JSON array of rules (times as ISO 8601, null where absent)`

const options = {
  workspace: { type: 'string' },
  kind: { type: 'string' },
  all: { type: 'boolean' },
} as const

function iso (ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString()
}

/** A rule as shown by the CLI: the stored fields, `workspace` for workspaceId, times in ISO 8601. */
export function showRule (r: Rule): Record<string, unknown> {
  const { workspaceId, expiresAt, createdAt, updatedAt, ...rest } = r
  return { ...rest, workspace: workspaceId, expiresAt: iso(expiresAt), createdAt: iso(createdAt), updatedAt: iso(updatedAt) }
}

/** One line: id, kind, identity, action, expiry. */
function ruleLine (r: Rule): string {
  const identity = r.kind === 'access_rule'
    ? `${r.target.type}=${r.target.value}${r.ruleRef === null ? '' : ` ref=${r.ruleRef}`}`
    : `ref=${r.ruleRef} type=${r.type}`
  return `${r.id}  ${r.kind}  ${identity}  ${r.action}  expires=${iso(r.expiresAt) ?? 'never'}\n`
}

function readKinds (kind: string | undefined): readonly RuleKind[] {
  if (kind === undefined) return RULE_KINDS
  if (!(RULE_KINDS as readonly string[]).includes(kind)) throw new CliError(`--kind must be one of ${RULE_KINDS.join(', ')}, got ${JSON.stringify(kind)}`)
  return [kind as RuleKind]
}

export const rulesCommand: Command = {
  name: 'rules',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const parsed = parseVerb(args, io, help, options)
    if (parsed === null) return 0
    const { verb, values } = parsed
    if (verb !== 'ls') throw new CliError(`unknown rules command ${JSON.stringify(verb)}; see threatfeed rules --help`)
    const workspaceId = requireOption(values, 'workspace')
    const kinds = readKinds(values.kind)
    const now = values.all === true ? undefined : Date.now()
    const rules = await withStore(io, async (s) => {
      const w = await s.workspaces.get(workspaceId)
      if (w === null || w.deletedAt !== null) throw new NotInStoreError(`no workspace with id ${workspaceId}`)
      const out: Rule[] = []
      for (const kind of kinds) out.push(...await s.rules.list(workspaceId, kind, now))
      return out
    })
    if (values.json === true) writeJson(io, rules.map(showRule))
    else if (rules.length === 0) writeNoneFound(io, `${values.all === true ? '' : 'live '}rules of workspace ${workspaceId}`)
    else for (const r of rules) io.stdout.write(ruleLine(r))
    return 0
  },
}
