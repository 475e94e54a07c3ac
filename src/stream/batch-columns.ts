/**
 * An appended batch as one string, for the consumer thread (consumer-thread.ts): what crosses
 * between threads is cloned, and cloning a thousand command objects cost the server's thread
 * 1.5 ms per batch (v8.serialize) and the consumer thread 3.7 ms to rebuild them. Access-rule
 * upserts — nearly every command of a bulk import — travel as columns, one array per field, in
 * one JSON text (0.5 ms to write, 0.5 ms to read back as commands, same batch); any other command
 * travels whole, beside the index it had.
 *
 * The round trip is exact: unpack(pack(b)) has the same seqs and the same commands, field for
 * field (test/stream/batch-columns.test.ts).
 */
import type { AppendedBatch } from '../ingest/batch.js'
import type { AccessUpsert, Command, Labels } from '../ingest/commands.js'
import type { Confidence, Severity, TargetType } from '../store/types.js'

interface Columns {
  readonly workspaceId: string
  readonly acceptedAt: number
  /** The first seq when they run on by one (what appends give); else every seq. */
  readonly first: number | null
  readonly seqs: readonly number[] | null
  readonly count: number
  /** Access-rule upserts, by position in the batch: null where another command stands. */
  readonly ruleRef: Array<string | null>
  readonly targetType: Array<TargetType | null>
  readonly targetValue: Array<string | null>
  readonly action: Array<'block' | 'allow' | null>
  readonly name: Array<string | null>
  readonly reason: Array<string | null>
  readonly confidence: Array<Confidence | null>
  readonly severity: Array<Severity | null>
  readonly expiresIn: Array<number | null>
  /** Labels of the upserts that have any, as [position, labels]. */
  readonly labels: Array<[number, Labels]>
  /** Every other command, as [position, command]. */
  readonly other: Array<[number, Command]>
}

/**
 * @example
 *   worker.postMessage({ type: 'offer', batch: packBatch(batch) })
 */
export function packBatch (batch: AppendedBatch): string {
  const n = batch.commands.length
  const contiguous = batch.seqs.every((s, i) => s === batch.seqs[0]! + i)
  const c: Columns = {
    workspaceId: batch.workspaceId,
    acceptedAt: batch.acceptedAt,
    first: contiguous && n > 0 ? batch.seqs[0]! : null,
    seqs: contiguous && n > 0 ? null : batch.seqs,
    count: n,
    ruleRef: new Array(n),
    targetType: new Array(n),
    targetValue: new Array(n),
    action: new Array(n),
    name: new Array(n),
    reason: new Array(n),
    confidence: new Array(n),
    severity: new Array(n),
    expiresIn: new Array(n),
    labels: [],
    other: [],
  }
  for (let i = 0; i < n; i++) {
    const cmd = batch.commands[i]!
    if (cmd.kind !== 'access_rule' || cmd.op !== 'upsert') {
      c.other.push([i, cmd])
      c.ruleRef[i] = c.targetType[i] = c.targetValue[i] = c.action[i] = c.name[i] = c.reason[i] = c.confidence[i] = c.severity[i] = c.expiresIn[i] = null
      continue
    }
    c.ruleRef[i] = cmd.ruleRef
    c.targetType[i] = cmd.target.type
    c.targetValue[i] = cmd.target.value
    c.action[i] = cmd.action
    c.name[i] = cmd.name
    c.reason[i] = cmd.reason
    c.confidence[i] = cmd.confidence
    c.severity[i] = cmd.severity
    c.expiresIn[i] = cmd.expiresIn
    for (const _ in cmd.labels) {
      c.labels.push([i, cmd.labels])
      break
    }
  }
  return JSON.stringify(c)
}

/** The batch packBatch packed. */
export function unpackBatch (text: string): AppendedBatch {
  const c = JSON.parse(text) as Columns
  const commands = new Array<Command>(c.count)
  let nextLabels = 0
  let nextOther = 0
  for (let i = 0; i < c.count; i++) {
    const other = c.other[nextOther]
    if (other !== undefined && other[0] === i) {
      commands[i] = other[1]
      nextOther++
      continue
    }
    let labels: Labels = {}
    const l = c.labels[nextLabels]
    if (l !== undefined && l[0] === i) {
      labels = l[1]
      nextLabels++
    }
    const cmd: AccessUpsert = {
      kind: 'access_rule',
      op: 'upsert',
      ruleRef: c.ruleRef[i]!,
      target: { type: c.targetType[i]!, value: c.targetValue[i]! },
      action: c.action[i]!,
      name: c.name[i]!,
      reason: c.reason[i]!,
      labels,
      confidence: c.confidence[i]!,
      severity: c.severity[i]!,
      expiresIn: c.expiresIn[i]!,
    }
    commands[i] = cmd
  }
  const seqs = c.seqs ?? Array.from({ length: c.count }, (_, i) => c.first! + i)
  return { workspaceId: c.workspaceId, acceptedAt: c.acceptedAt, seqs, commands }
}
