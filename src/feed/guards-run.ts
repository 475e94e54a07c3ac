/**
 * A guarded build, as FeedService runs it (guards.ts decides; this wires the decision to the rule
 * cache, the pool and the snapshot builder): the candidate's targets and its frozen rows are taken
 * under the rule table's lock, the guard decides, and one snapshot is built from what it chose.
 */
import { ThreatfeedError } from '../errors.js'
import type { GeoIndex } from '../geo/geo-index.js'
import type { AccessList, GuardSettings, PublishedRecord, PublishState } from '../store/types.js'
import type { ComputeResult, ComputeTask } from '../pool/protocol.js'
import { feedTargets, shardCountsOf, type BuildResult, type FeedTargets } from './build-snapshot.js'
import { freezeRows, markHeld, specialMode, type FeedGuard, type GuardName } from './guards.js'
import { restoreGuard } from './guards-persist.js'
import { allTargeting, grouping, lapsing, selecting, type RuleTable } from './rule-table.js'
import { runSliced, runWhole } from './slices.js'

export interface GuardedBuildIo {
  /** The feed's workspace (a held first build names how to accept it). */
  workspaceId: string
  guard: FeedGuard
  settings: GuardSettings
  list: AccessList | null
  /** dialect_a's name and description, as the builder hashes them. */
  meta: string
  /** When the guard's decision is made (a held build's `since`). */
  now: number
  /** Rules lapsing at or before it are left out, of the candidate and of the published rules (default `now`). */
  cutoff?: number
  read: <T>(fn: (table: RuleTable) => Promise<T>) => Promise<T>
  compute: (task: Omit<ComputeTask, 'geo'>) => Promise<ComputeResult>
  build: (targets: FeedTargets, special: 'detect' | 'drop' | undefined) => Promise<BuildResult>
  /** Shard counts asked for besides the list's stored one (BuildOptions.shards). */
  shards: readonly number[]
  /** Called when the guard's state changed (to record it with the list, log it, count it). */
  onState: (state: PublishState) => void
  /** The geo index the expansions use (min-prefix judges their database records). */
  geo?: Pick<GeoIndex, 'widestRecord'>
  /** The stored record of what this feed published (guards-persist.ts), read before its first build. */
  restore?: () => Promise<PublishedRecord | null>
}

function * candidateOf (table: RuleTable, list: AccessList | null, cutoff: number): Generator<void, { targets: FeedTargets, frozen: RuleTable }> {
  const defaults = list?.defaults ?? null
  const s = yield * selecting(table, list, cutoff)
  const targets: FeedTargets = {
    block: yield * grouping(table, s.block, defaults),
    allow: yield * grouping(table, s.allow, defaults),
    carve: yield * allTargeting(table, s.carve),
    expiresAt: s.expiresAt,
    lapses: { block: yield * lapsing(table, s.block), allow: yield * lapsing(table, s.allow) },
  }
  // Frozen now, while the table cannot move: these rows are what publishing this build publishes.
  return { targets, frozen: freezeRows(table, [s.block, s.allow, s.carve]) }
}

/** What a feed whose first build is held answers (a 503): the guard, and how an operator publishes it. */
function heldFirstBuild (io: GuardedBuildIo, guards: string, digest: string | null): ThreatfeedError {
  const accept = io.list === null
    ? `POST /v1/admin/workspaces/${io.workspaceId}/accept`
    : `threatfeed list accept --id ${io.list.id}`
  return new ThreatfeedError('TF_ERR_FEED_HELD', [guards, accept], { details: { held: guards, digest, accept } })
}

/**
 * @example
 *   const result = await guardedBuild({ guard: f.guard, settings, list, meta, now, read, compute, build, onState })
 */
export async function guardedBuild (io: GuardedBuildIo): Promise<BuildResult> {
  if (io.restore !== undefined) await restoreGuard(io.guard, io.restore)
  const cutoff = io.cutoff ?? io.now
  const candidate = await io.read((table) => runSliced(candidateOf(table, io.list, cutoff)))
  const decision = await io.guard.decide({
    settings: io.settings,
    now: io.now,
    candidate: { targets: candidate.targets, frozen: () => candidate.frozen },
    publishedTargets: (table) => runWhole(feedTargets(table, io.list, cutoff)),
    compute: io.compute,
    meta: io.meta,
    defaultAction: io.list?.defaults.action ?? 'block',
    shards: shardCountsOf(io.list, io.shards),
    ...(io.geo !== undefined ? { geo: io.geo } : {}),
  })
  if (decision.state !== undefined) io.onState(decision.state)
  if (decision.targets === null) {
    // Never published: nothing good to fall back on, and serving the tripped build is what the guard is for.
    throw heldFirstBuild(io, [...new Set(Object.values(decision.held))].join(', '), io.guard.state.held?.digest ?? null)
  }
  const result = await io.build(decision.targets, specialMode(io.settings))
  const held = decision.held as Partial<Record<'block' | 'allow', GuardName>>
  if (Object.keys(held).length === 0) return result
  return { ...result, snapshot: markHeld(result.snapshot, held) }
}
