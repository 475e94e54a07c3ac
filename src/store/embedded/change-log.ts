/**
 * The access-rule change log (format 6): what a rebuild's catch-up reads instead of every rule
 * header of the workspace (RuleStore#accessRulesChangedSince).
 *
 * Every change of an access rule takes a number from the store's one counter (META.arrivalNext,
 * taken under the write lock, so numbers rise in commit order across processes). A new unkeyed
 * rule is stored under that number already (its arrival key): nothing more is written for it, so
 * the hot insert path pays nothing. Every other change — an update in place, a keyed rule, a
 * removal (delete or sweep) — writes one entry here:
 *
 *   access-changes   ws␟<n, 14 hex digits>  →  [time, f64][op][payload]
 *                       op '+': payload is the primary key of the rule that changed
 *                       op '-': payload is the identity removed: r␟<ruleRef> or t␟<type>␟<value>
 *                       op '*': the identities a sweep pass removed (format 8), each as
 *                               [u16 length][identity]: one entry a pass and workspace, not one
 *                               a rule (bench/NOTES.md, "Sweep: the cost of a removal")
 *
 * A catch-up since n reads the workspace's arrival keys and change entries numbered after n,
 * merged in number order (a removal and a re-insert of one target must apply in that order):
 * O(changes), not O(rules). Entries are kept CHANGES_KEPT_MS; each write transaction drops a few
 * of the oldest of the workspaces it changed, and records the highest number dropped, so a
 * catch-up from before it knows it cannot be served from the log (it reads the workspace whole).
 */
import type { Target } from '../types.js'
import { arrivalKey, type KeyRange } from './key-layout.js'
import type { Databases } from './layout.js'

/** How long change entries are kept: a cache that refreshes at least this often catches up from the log. */
export const CHANGES_KEPT_MS = 600_000
/** Oldest entries looked at per workspace per write, at least: with twice what the write added,
 *  the trim outruns any rate of writes, so the log holds about CHANGES_KEPT_MS of them. */
const TRIM_PER_WRITE = 64

const SEP = '\u001f'
const AFTER_SEP = ' '
const OP_PUT = 0x2b // '+'
const OP_GONE = 0x2d // '-'
const OP_SWEPT = 0x2a // '*'
const TIME_BYTES = 8

/** The meta key of the highest change number a trim dropped in a workspace (0: none). */
export function changesTrimmedKey (workspaceId: string): string {
  return `changes:trimmed:${workspaceId}`
}

/** Change numbers share arrival keys' form, so one hex parse reads both. */
export function changeKey (workspaceId: string, n: number): string {
  return arrivalKey(workspaceId, n).replace(`${SEP}a${SEP}`, SEP)
}

/** The workspace's change entries numbered after `after`. */
export function changeRange (workspaceId: string, after: number): KeyRange {
  return { start: changeKey(workspaceId, after + 1), end: workspaceId + AFTER_SEP }
}

/** An access rule's identity as a removal names it. */
export interface Removed {
  readonly ruleRef: string | null
  readonly target: Target | null
}

/** A decoded change entry. */
export type Change =
  | { readonly op: 'put', readonly pk: string }
  | { readonly op: 'gone', readonly removed: readonly Removed[] }

/** The identity of a removed access rule as the entry holds it. */
export function removedIdentity (ruleRef: string | null, target: Target): string {
  return ruleRef !== null ? `r${SEP}${ruleRef}` : `t${SEP}${target.type}${SEP}${target.value}`
}

/** Inside a write: logs one change of the workspace under a new number `n`. */
export function logChange (dbs: Databases, workspaceId: string, n: number, now: number, op: 'put' | 'gone', payload: string): void {
  // Not the transaction's scratch writer: callers may still hold the value encoded there.
  const value = Buffer.allocUnsafe(TIME_BYTES + 1 + Buffer.byteLength(payload))
  value.writeDoubleLE(now, 0)
  value[TIME_BYTES] = op === 'put' ? OP_PUT : OP_GONE
  value.write(payload, TIME_BYTES + 1, 'utf8')
  dbs.accessChanges.put(changeKey(workspaceId, n), value)
}

/** Inside a write: logs the removal of several identities (removedIdentity) under one number `n`. */
export function logRemovals (dbs: Databases, workspaceId: string, n: number, now: number, identities: readonly string[]): void {
  let bytes = TIME_BYTES + 1
  for (const id of identities) bytes += 2 + Buffer.byteLength(id)
  const value = Buffer.allocUnsafe(bytes)
  value.writeDoubleLE(now, 0)
  value[TIME_BYTES] = OP_SWEPT
  let at = TIME_BYTES + 1
  for (const id of identities) {
    const length = value.write(id, at + 2, 'utf8')
    value.writeUInt16LE(length, at)
    at += 2 + length
  }
  dbs.accessChanges.put(changeKey(workspaceId, n), value)
}

export function decodeChange (value: Buffer): Change {
  const op = value[TIME_BYTES]
  if (op === OP_PUT) return { op: 'put', pk: value.toString('utf8', TIME_BYTES + 1) }
  if (op === OP_GONE) return { op: 'gone', removed: [decodeIdentity(value.toString('utf8', TIME_BYTES + 1))] }
  const removed: Removed[] = []
  for (let at = TIME_BYTES + 1; at < value.length;) {
    const length = value.readUInt16LE(at)
    removed.push(decodeIdentity(value.toString('utf8', at + 2, at + 2 + length)))
    at += 2 + length
  }
  return { op: 'gone', removed }
}

function decodeIdentity (payload: string): Removed {
  const parts = payload.split(SEP)
  if (parts[0] === 'r') return { ruleRef: parts.slice(1).join(SEP), target: null }
  return { ruleRef: null, target: { type: parts[1] as Target['type'], value: parts.slice(2).join(SEP) } }
}

/** The change number of a change key or an arrival key (both end in 14 hex digits). */
export function numberOfKey (key: string): number {
  return Number.parseInt(key.slice(key.length - 14), 16)
}

/**
 * Inside a write that added `added` entries to the workspace's log: drops up to
 * max(TRIM_PER_WRITE, 2 × added) of its entries older than `keptMs`, oldest first, and
 * raises the workspace's trim mark past them.
 */
export function trimChanges (dbs: Databases, workspaceId: string, now: number, added: number, keptMs = CHANGES_KEPT_MS): void {
  const cut = now - keptMs
  const old: string[] = []
  for (const { key, value } of dbs.accessChanges.getRange({ ...changeRange(workspaceId, 0), limit: Math.max(TRIM_PER_WRITE, 2 * added) })) {
    if (value.readDoubleLE(0) >= cut) break
    old.push(key)
  }
  if (old.length === 0) return
  for (const key of old) dbs.accessChanges.remove(key)
  dbs.meta.put(changesTrimmedKey(workspaceId), numberOfKey(old[old.length - 1]!))
}
