/**
 * Key layout of the embedded store. Identity (DECISIONS §3) is enforced by construction: a rule's
 * primary key IS its identity, so a second upsert of the same identity can only overwrite.
 *
 *   access-rules      ws␟r␟<ruleRef>              keyed access rule   (workspace, ruleRef)
 *                     ws␟a␟<n, 14 hex digits>     unkeyed access rule in arrival order (format 5:
 *                                                  n counts up across the store; its identity is
 *                                                  found through arrival-index.ts)
 *                     ws␟t␟<type>␟<value>         unkeyed access rule keyed by its target (written
 *                                                  before format 5)
 *   access-by-target  ws␟<type>␟<value>␟<ruleRef> → primary key        (keyed rules only: an
 *                                                  unkeyed rule has none)
 *   expression-rules  ws␟<kind>␟<ruleRef>
 *   tombstone key     ws␟t␟<type>␟<value>␟<ruleRef or empty>   a swept access rule
 *                     ws␟x␟<kind>␟<ruleRef>                    a swept expression rule
 *                                                  (the second part of a tombstones-by-target
 *                                                  key, tombstones.ts)
 *   lists-by-name     ws␟<name>␟<id>              → id
 *   feed-versions     ws␟<listId>␟<family>␟<action>
 *
 * ␟ is U+001F (unit separator). Access-rule keys are stored as their UTF-8 bytes (lmdb-env.ts);
 * the others go through lmdb-js's ordered-binary key encoding, which
 * escapes characters U+0000..U+0004 only in strings shorter than 64 characters and writes longer
 * ones as raw UTF-8: a U+0000 separator would encode differently in a short range bound than in
 * the long key it must match (a bug this layout was changed for). U+001F is written as the same
 * raw byte on both paths. Workspace ids (UUIDs), kinds, target types, canonical target values and
 * rule refs never hold it, so every key that starts with `prefix + ␟` lies in
 * [prefix + ␟, prefix + ' '): prefix scans are exact. Free text (a list name) only ever ends a
 * prefix, and list names are re-checked on the record anyway (they hold no control characters:
 * the CLI refuses them, DECISIONS §5).
 */
import type { FeedKey, FeedRef, RuleKind, Target } from '../types.js'
import type { ByteWriter } from './byte-writer.js'

const SEP = '\u001f'
/** The character after SEP: the exclusive end of a prefix range. */
const AFTER_SEP = ' '

/** The [start, end) range of keys that begin with the given components. */
export interface KeyRange {
  start: string
  end: string
}

function rangeOf (prefix: string): KeyRange {
  return { start: prefix + SEP, end: prefix + AFTER_SEP }
}

export function accessRuleKey (workspaceId: string, ruleRef: string | null, target: Target): string {
  return ruleRef === null
    ? workspaceId + SEP + 't' + SEP + target.type + SEP + target.value
    : workspaceId + SEP + 'r' + SEP + ruleRef
}

const SEP_BYTE = 0x1f
let lastWorkspace = ''
let lastWorkspaceBytes = Buffer.from(SEP, 'utf8')
const TARGET_TAG = 0x74 // 't'
const REF_TAG = 0x72 // 'r'

/**
 * accessRuleKey as its UTF-8 bytes, written into `w` — the hot path of an upsert: building the
 * string first cost a concatenation and a flattening per rule (measured, bench/ingest.ts).
 * The bytes are those of the string (test/store/embedded/key-layout.test.ts).
 */
export function writeAccessRuleKey (w: ByteWriter, workspaceId: string, ruleRef: string | null, target: Target): void {
  // A batch is one workspace's: its bytes are made once, not once per rule.
  if (workspaceId !== lastWorkspace) {
    lastWorkspace = workspaceId
    lastWorkspaceBytes = Buffer.from(workspaceId + SEP, 'utf8')
  }
  w.bytes(lastWorkspaceBytes)
  if (ruleRef === null) {
    w.u8(TARGET_TAG)
    w.u8(SEP_BYTE)
    w.raw(target.type)
    w.u8(SEP_BYTE)
    w.raw(target.value)
  } else {
    w.u8(REF_TAG)
    w.u8(SEP_BYTE)
    w.raw(ruleRef)
  }
}

export const ARRIVAL_DIGITS = 14

/**
 * Where a new unkeyed access rule is stored: `n` is the store's arrival counter (arrival-index.ts),
 * taken under the write lock, so every new rule goes after every earlier one and a pass of new
 * targets appends to one end of the B-tree instead of dirtying a page per target
 * (bench/NOTES.md, "Consumer: arrival order").
 */
export function arrivalKey (workspaceId: string, n: number): string {
  return workspaceId + SEP + 'a' + SEP + n.toString(16).padStart(ARRIVAL_DIGITS, '0')
}

/** The arrival number of an arrival key. */
export function arrivalNumberOfKey (key: string): number {
  return Number.parseInt(key.slice(key.length - ARRIVAL_DIGITS), 16)
}

/** A workspace's arrival keys numbered after `after` (all of them: 0). */
export function arrivalRange (workspaceId: string, after: number): KeyRange {
  const prefix = workspaceId + SEP + 'a'
  return { start: arrivalKey(workspaceId, after + 1), end: prefix + AFTER_SEP }
}

/** Every unkeyed access rule of a workspace stored under its target key. */
export function targetKeyRange (workspaceId: string): KeyRange {
  return rangeOf(workspaceId + SEP + 't')
}

/** The identity of an unkeyed access rule inside its workspace, as the arrival index keys it. */
export function targetIdentity (target: Target): string {
  return target.type + SEP + target.value
}

/** targetIdentity read from an unkeyed rule's target key (writeAccessRuleKey's bytes). */
export function targetIdentityOfKey (key: Buffer, workspaceId: string): string {
  if (workspaceId !== lastWorkspace) {
    lastWorkspace = workspaceId
    lastWorkspaceBytes = Buffer.from(workspaceId + SEP, 'utf8')
  }
  // workspace␟ then t␟
  return key.toString('utf8', lastWorkspaceBytes.length + 2)
}

/** The workspace a primary key (access or expression rule) belongs to. */
export function workspaceOfKey (key: string): string {
  const end = key.indexOf(SEP)
  return end < 0 ? key : key.slice(0, end)
}

export function accessRuleKeyByRef (workspaceId: string, ruleRef: string): string {
  return workspaceId + SEP + 'r' + SEP + ruleRef
}

export function targetIndexKey (workspaceId: string, target: Target, ruleRef: string): string {
  return workspaceId + SEP + target.type + SEP + target.value + SEP + ruleRef
}

export function targetIndexRange (workspaceId: string, target: Target): KeyRange {
  return rangeOf(workspaceId + SEP + target.type + SEP + target.value)
}

export function expressionRuleKey (workspaceId: string, kind: RuleKind, ruleRef: string): string {
  return workspaceId + SEP + kind + SEP + ruleRef
}

export function expressionRuleRange (workspaceId: string, kind: RuleKind): KeyRange {
  return rangeOf(workspaceId + SEP + kind)
}

/** Every access rule of a workspace, keyed and unkeyed. */
export function workspaceRange (workspaceId: string): KeyRange {
  return rangeOf(workspaceId)
}

/** Where the tombstone of a swept rule is kept: by target first, which is how it is looked up. */
export function tombstoneKey (workspaceId: string, kind: RuleKind, target: Target | null, ruleRef: string | null): string {
  return target !== null
    ? workspaceId + SEP + 't' + SEP + target.type + SEP + target.value + SEP + (ruleRef ?? '')
    : workspaceId + SEP + 'x' + SEP + kind + SEP + (ruleRef ?? '')
}

/** The identity a tombstone key names: tombstoneKey read back. */
export function tombstoneOfKey (key: string): { workspaceId: string, kind: RuleKind, target: Target | null, ruleRef: string | null } {
  const parts = key.split(SEP)
  const ref = (from: number): string | null => {
    const text = parts.slice(from).join(SEP)
    return text === '' ? null : text
  }
  if (parts[1] === 't') return { workspaceId: parts[0]!, kind: 'access_rule', target: { type: parts[2] as Target['type'], value: parts[3]! }, ruleRef: ref(4) }
  return { workspaceId: parts[0]!, kind: parts[2] as RuleKind, target: null, ruleRef: ref(3) }
}

export function tombstoneTargetRange (workspaceId: string, target: Target): KeyRange {
  return rangeOf(workspaceId + SEP + 't' + SEP + target.type + SEP + target.value)
}

export function listNameKey (workspaceId: string, name: string, id: string): string {
  return workspaceId + SEP + name + SEP + id
}

export function listNameRange (workspaceId: string, name: string): KeyRange {
  return rangeOf(workspaceId + SEP + name)
}

export function feedVersionKey (key: FeedKey): string {
  return key.workspaceId + SEP + key.listId + SEP + key.family + SEP + key.action
}

/** A feed's key in the published-rules database: its feed-versions keys' first two components. */
export function publishedRulesKey (ref: FeedRef): string {
  return ref.workspaceId + SEP + ref.listId
}

/** The feed of a published-rules (or served-copies) key. */
export function feedOfPublishedKey (key: string): FeedRef {
  const a = key.indexOf(SEP)
  return { workspaceId: key.slice(0, a), listId: key.slice(a + 1) }
}

/** The feed a feed-versions key belongs to (its first two components). */
export function feedOfVersionKey (key: string): FeedRef {
  const a = key.indexOf(SEP)
  const b = key.indexOf(SEP, a + 1)
  return { workspaceId: key.slice(0, a), listId: key.slice(a + 1, b) }
}
