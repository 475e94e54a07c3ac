/**
 * `threatfeed feed get`: the operator's view of a feed — exactly the bytes an appliance would
 * receive for the same parameters, built through the same code path as the server
 * (feed/build-snapshot.ts, with the worker tasks run in-process) from the configured store and geo
 * databases. It records Last-Modified the way the server does, so both agree.
 */
import { CliError, parseOptions, requireOption, writeHelp, writeJson, type CliIo, type Command, NotInStoreError } from './command.js'
import { withStore } from './open-store.js'
import { ThreatfeedError } from '../errors.js'
import { feedHoldOf } from '../feed/explain.js'
import { buildAsServed } from '../feed/guards-offline.js'
import { MAX_SHARDS } from '../feed/render/shard-networks.js'
import { resolveShard, shardValues } from '../feed/shards.js'
import { inProcessTasks } from '../feed/in-process-tasks.js'
import { LastModifiedKeeper } from '../feed/last-modified.js'
import { toRuleTable } from '../feed/rule-table.js'
import { variantKey, type VariantParams } from '../feed/snapshot-types.js'
import { resolveGeoPaths } from '../geo/default-db.js'
import { GeoIndex } from '../geo/geo-index.js'
import { loadGeoIndex } from '../geo/load.js'
import { FAMILIES, FEED_ACTIONS, FORMATS, type AccessList, type ListDefaults, type Store } from '../store/types.js'

const FORMAT_ALIASES: Readonly<Record<string, string>> = { txt: 'plain', alias_c: 'plain', alias_d: 'plain' }

const help = `Usage: threatfeed feed get --workspace ID [--list NAME|UUID] [--format F] [--family F]
                          [--action A] [--checksum md5] [--shard I [--of N]] [--gzip] [--json]

Prints the feed exactly as an appliance would receive it (GET /v1/threat/feeds, or
/v1/threat/feeds/{list} with --list): the body on stdout, nothing else. Parameters not given
take the list's stored defaults, then the feed defaults (plain, both, block). A feed that the
server's publish guards hold prints what the server serves (the last published rules) and says
so on stderr.

  --format    ${FORMATS.join(' | ')} (also txt, alias_c, alias_d for plain)
  --family    ${FAMILIES.join(' | ')} (nftables needs v4 or v6)
  --action    ${FEED_ACTIONS.join(' | ')}
  --checksum  md5: the MD5 of the feed instead of the feed
  --shard, --of  shard I of N (1 ≤ I ≤ N ≤ ${MAX_SHARDS}); --of defaults to the list's stored shard
              count. Bad values print the 400 error body the server answers, and exit 2.
  --gzip      the gzip-encoded body (as sent with Accept-Encoding: gzip)
  --json      {"status","contentType","etag","lastModified","entries","limit","body"}
              (body as text; bodyBase64 instead with --gzip)

A feed over its entry cap prints the 413 error body and exits with status 1.`

const options = {
  workspace: { type: 'string' },
  list: { type: 'string' },
  format: { type: 'string' },
  family: { type: 'string' },
  action: { type: 'string' },
  checksum: { type: 'string' },
  shard: { type: 'string' },
  of: { type: 'string' },
  gzip: { type: 'boolean' },
} as const

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

function oneOf<T extends string> (option: string, values: readonly T[], v: string | undefined): T | undefined {
  if (v === undefined) return undefined
  if (!(values as readonly string[]).includes(v)) throw new CliError(`--${option} must be one of ${values.join(', ')}, got ${JSON.stringify(v)}`)
  return v as T
}

/** The list named by UUID or by name in the workspace (SPEC 4.4: 404 / 409 as CLI errors). */
export async function findList (store: Store, workspaceId: string, nameOrId: string): Promise<AccessList> {
  if (UUID.test(nameOrId)) {
    const byId = await store.lists.get(nameOrId.toLowerCase())
    if (byId !== null && byId.workspaceId === workspaceId) return byId
  }
  const named = await store.lists.findByName(workspaceId, nameOrId)
  if (named.length > 1) throw new CliError(`list name ${JSON.stringify(nameOrId)} matches ${named.length} lists; give its UUID`, 1)
  if (named.length === 0) throw new NotInStoreError(`no list ${JSON.stringify(nameOrId)} in workspace ${workspaceId}`)
  return named[0]!
}

/** A shard option's value: the server's own check (feed/shards.ts), its 400 as a CLI error. */
function shardOption (name: 'shard' | 'of', v: string | undefined): number | null {
  if (v === undefined) return null
  const supported = shardValues(MAX_SHARDS)
  if (!supported.includes(v)) throw new ThreatfeedError('TF_ERR_FEED_BAD_PARAM', [`${name}: ${JSON.stringify(v)}`], { details: { parameter: name, value: v, supported } })
  return Number(v)
}

function paramsOf (values: Record<string, unknown>, defaults: ListDefaults | null): VariantParams {
  const rawFormat = values.format as string | undefined
  const format = oneOf('format', FORMATS, rawFormat === undefined ? undefined : FORMAT_ALIASES[rawFormat] ?? rawFormat)
  const family = oneOf('family', FAMILIES, values.family as string | undefined)
  const action = oneOf('action', FEED_ACTIONS, values.action as string | undefined)
  const checksum = oneOf('checksum', ['md5'] as const, values.checksum as string | undefined)
  const p: VariantParams = {
    format: format ?? defaults?.format ?? 'plain',
    family: family ?? defaults?.family ?? 'both',
    action: action ?? defaults?.action ?? 'block',
    checksum: checksum !== undefined,
    shard: resolveShard(shardOption('shard', values.shard as string | undefined), shardOption('of', values.of as string | undefined), defaults?.shards),
  }
  if (p.format === 'nftables' && p.family === 'both') throw new CliError('an nftables set holds one family: give --family v4 or --family v6')
  return p
}

export const feedCommand: Command = {
  name: 'feed',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const [verb, ...rest] = args
    if (verb === undefined || verb === '--help' || verb === '-h') return writeHelp(io, help)
    if (verb !== 'get') throw new CliError(`unknown feed command ${JSON.stringify(verb)}; see threatfeed feed --help`)
    const { values } = parseOptions(rest, options)
    if (values.help === true) return writeHelp(io, help)
    const workspaceId = requireOption(values, 'workspace')
    return withStore(io, async (store) => {
      const workspace = await store.workspaces.get(workspaceId)
      if (workspace === null || workspace.deletedAt !== null) throw new NotInStoreError(`no workspace with id ${workspaceId}`)
      const list = values.list === undefined ? null : await findList(store, workspaceId, values.list)
      let params: VariantParams
      try {
        params = paramsOf(values, list?.defaults ?? null)
      } catch (e) {
        // The body an appliance gets for the same query (SPEC 2.9), and the usage exit status.
        if (!(e instanceof ThreatfeedError)) throw e
        writeJson(io, { success: false, error: e.message, details: e.details })
        throw new CliError(e.message)
      }
      const now = Date.now()
      const rules = await store.rules.listAccessRules(workspaceId, now)
      // The geo databases take a second or two to index: only when a rule needs them.
      const geo = rules.some((r) => r.target.type !== 'ip')
        ? await loadGeoIndex(await resolveGeoPaths(io.env, { progress: io.isTTY, stream: io.stderr }))
        : GeoIndex.empty()
      const { snapshot, publish } = await buildAsServed({ workspaceId, workspaceName: workspace.name, list }, toRuleTable(rules), workspace.feedGuards, store.feedVersions, {
        tasks: inProcessTasks(geo),
        geo,
        lastModified: new LastModifiedKeeper(store.feedVersions, { timeoutMs: 10_000 }),
        now,
        ...(params.shard != null ? { shards: [params.shard.of] } : {}),
      })
      if (publish?.held != null) {
        const hold = feedHoldOf(publish.held)
        io.stderr.write(`threatfeed: the server serves the last published rules since ${hold.since}: ${hold.reason}\n`)
      }
      const variant = snapshot.variants.get(variantKey(params))!
      const rep = values.gzip === true ? variant.gzip : variant.identity
      const body = Buffer.from(rep.body.buffer, rep.body.byteOffset, rep.body.byteLength)
      if (values.json === true) {
        writeJson(io, {
          status: variant.status,
          contentType: variant.contentType,
          ...(values.gzip === true ? { contentEncoding: 'gzip' } : {}),
          etag: rep.etag,
          lastModified: variant.lastModifiedHttp,
          entries: variant.entries,
          limit: variant.limit,
          ...(values.gzip === true ? { bodyBase64: body.toString('base64') } : { body: body.toString('utf8') }),
        })
      } else {
        io.stdout.write(body)
      }
      if (variant.status === 413) {
        io.stderr.write(`threatfeed: the feed has ${variant.entries} entries, over its limit of ${variant.limit}\n`)
        return 1
      }
      return 0
    })
  },
}

