/**
 * A guarded feed's published rules and publish state, kept in the store (FeedVersionStore
 * savePublished / loadPublished) so that a restarted server, another node or the CLI holds what
 * this one held: it serves the last published rules re-evaluated now, judges the next build
 * against them, and `list accept` names the same held digest.
 *
 * The rules are the frozen rows of the published build (guards.ts freezeRows), not its bytes:
 * a held rule must still lapse at its expiry, wherever the feed is rebuilt. They are encoded with
 * V8's serializer (typed arrays are copied as they are), once per published table.
 */
import { deserialize, serialize } from 'node:v8'
import type { FeedRef, FeedVersionStore, PublishedRecord, PublishState } from '../store/types.js'
import type { FeedGuard } from './guards.js'
import type { RuleTable } from './rule-table.js'

/** Format of the encoded table; a record of another format is ignored (judged as never published). */
const TABLE_FORMAT = 1

/** The published table as bytes. */
export function encodeTable (t: RuleTable): Uint8Array {
  return serialize({
    format: TABLE_FORMAT,
    length: t.length,
    type: t.type,
    allow: t.allow,
    value: t.value,
    expiresAt: t.expiresAt,
    labels: t.labels,
    labelSets: t.labelSets,
    confidence: t.confidence,
    severity: t.severity,
    fingerprint: t.fingerprint,
  })
}

/** The table encodeTable wrote, or null when the bytes are of another format. */
export function decodeTable (bytes: Uint8Array): RuleTable | null {
  const r = deserialize(bytes) as RuleTable & { format?: number }
  if (r.format !== TABLE_FORMAT) return null
  return {
    length: r.length,
    type: r.type,
    allow: r.allow,
    value: r.value,
    expiresAt: r.expiresAt,
    labels: r.labels,
    labelSets: r.labelSets,
    confidence: r.confidence,
    severity: r.severity,
    fingerprint: r.fingerprint,
  }
}

/** Restores a guard from its stored record, once per guard (a guard already restored is left). */
export async function restoreGuard (guard: FeedGuard, load: () => Promise<PublishedRecord | null>): Promise<void> {
  if (guard.restored) return
  const r = await load()
  const table = r?.rules == null ? null : decodeTable(r.rules)
  guard.restore(table, r === null ? null : r.state)
}

/** The last encoding of each published table: a state change alone does not encode it again. */
const encoded = new WeakMap<RuleTable, Uint8Array>()

/**
 * Saves the guard's published rules with its new state; a guard reset (nothing published, nothing
 * held) forgets the record. Saves of one feed are chained, so the last state is the one stored.
 *
 * @example
 *   persistGuard(f.guard, store.feedVersions, { workspaceId, listId }, state, Date.now()).catch(log)
 */
export function persistGuard (guard: FeedGuard, store: Pick<FeedVersionStore, 'savePublished'>, ref: FeedRef, state: PublishState, now: number): Promise<void> {
  const table = guard.published
  let record: PublishedRecord | null = null
  if (table !== null || state.held !== null) {
    let rules: Uint8Array | null = null
    if (table !== null) {
      rules = encoded.get(table) ?? encodeTable(table)
      encoded.set(table, rules)
    }
    record = { state, rules, savedAt: now }
  }
  const previous = chains.get(guard) ?? Promise.resolve()
  const next = previous.catch(() => {}).then(() => store.savePublished(ref, record))
  chains.set(guard, next)
  return next
}

const chains = new WeakMap<FeedGuard, Promise<void>>()
