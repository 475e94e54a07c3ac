/**
 * A feed built outside the server (`threatfeed feed get`, `threatfeed explain`) the way the server
 * builds it, publish guards included: the guard starts from the published rules and hold the
 * server keeps in the store (guards-persist.ts), so a held feed prints the bytes the server serves
 * and names its hold. Nothing is recorded: the CLI reads, the server decides.
 */
import type { GeoIndex } from '../geo/geo-index.js'
import type { FeedVersionStore, GuardSettings, PublishState } from '../store/types.js'
import { buildSnapshot, metaOf, type BuildOptions, type BuildResult, type FeedDefinition } from './build-snapshot.js'
import { FeedGuard, hasGuards } from './guards.js'
import { guardedBuild } from './guards-run.js'
import type { RuleTable } from './rule-table.js'

export interface OfflineBuild extends BuildResult {
  /** The publish state the build ended in (null: the feed has no guards). */
  readonly publish: PublishState | null
}

/**
 * @example
 *   const { snapshot, publish } = await buildAsServed(def, table, workspace.feedGuards, store.feedVersions, { tasks, lastModified, now })
 */
export async function buildAsServed (
  def: FeedDefinition,
  table: RuleTable,
  workspaceGuards: GuardSettings | undefined,
  store: Pick<FeedVersionStore, 'loadPublished'>,
  opts: BuildOptions & { geo: GeoIndex },
): Promise<OfflineBuild> {
  const settings = def.list === null ? workspaceGuards : def.list.defaults.guards
  if (!hasGuards(settings)) return { ...await buildSnapshot(def, table, opts), publish: null }
  const guard = new FeedGuard()
  const result = await guardedBuild({
    workspaceId: def.workspaceId,
    guard,
    settings,
    list: def.list,
    meta: metaOf(def),
    now: opts.now,
    read: (fn) => fn(table),
    compute: (task) => opts.tasks.compute(task),
    build: (targets, special) => buildSnapshot(def, targets, { ...opts, ...(special !== undefined ? { special } : {}) }),
    shards: opts.shards ?? [],
    onState: () => {},
    geo: opts.geo,
    restore: () => store.loadPublished({ workspaceId: def.workspaceId, listId: def.list?.id ?? '*' }),
  })
  return { ...result, publish: guard.state }
}
