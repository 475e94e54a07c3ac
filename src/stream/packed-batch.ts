/**
 * An appended batch packed for a store's consumer thread (../store/consumer-thread.ts): each
 * command becomes its rule op here, on the server's thread, and the store packs the op in its own
 * stored form when it has one; a command it cannot pre-encode travels as its JSON and is made into
 * its op again on the thread (commandFromText).
 *
 * The seqs of a batch run on by one from the first (what both stores' appends give); a batch
 * whose seqs do not is not handed over (the consumer then reads it from the stream).
 */
import type { AppendedBatch } from '../ingest/batch.js'
import type { Command } from '../ingest/commands.js'
import type { RuleOp } from '../store/batch-types.js'
import type { BatchPacker } from '../store/consumer-thread.js'
import { toRuleOp } from './apply.js'

/**
 * The commands of a batch as one buffer to transfer, its records numbered from 0: the seqs are
 * not known yet when a batch is packed in its accept frame (ThreadedConsumer#prepare), so the
 * offer carries the first one and the thread adds it (ConsumerThreadSide#unpack's seqOffset).
 *
 * @example
 *   const packed = packCommands(handoff.packer, workspaceId, acceptedAt, commands)
 *   // once appended at seqs first…first + commands.length − 1:
 *   worker.postMessage({ type: 'offer', batch: packed, seqOffset: first }, [packed])
 */
export function packCommands (packer: BatchPacker, workspaceId: string, acceptedAt: number, commands: readonly Command[], first = 0): ArrayBuffer {
  packer.start(workspaceId, acceptedAt, first, commands.length)
  for (let i = 0; i < commands.length; i++) {
    const c = commands[i]!
    if (!packer.addOp(toRuleOp(c, workspaceId, first + i, acceptedAt))) packer.addText(JSON.stringify(c))
  }
  return packer.finish()
}

/**
 * An appended batch packed with its seqs; null when they do not run on by one.
 *
 * @example
 *   const packed = packBatch(handoff.packer, batch)
 *   if (packed !== null) worker.postMessage({ type: 'offer', batch: packed, seqOffset: 0 }, [packed])
 */
export function packBatch (packer: BatchPacker, batch: AppendedBatch): ArrayBuffer | null {
  const { workspaceId, acceptedAt, seqs, commands } = batch
  return contiguous(seqs, commands.length) ? packCommands(packer, workspaceId, acceptedAt, commands, seqs[0]) : null
}

/** True when `seqs` run on by one, one per record of a packed batch of `count` (what both stores' appends give). */
export function contiguous (seqs: readonly number[], count: number): boolean {
  const first = seqs[0]
  return first !== undefined && seqs.length === count && seqs[seqs.length - 1] === first + count - 1
}

/** The thread's side of packCommands's text: the command's op (FromText). */
export function commandFromText (text: string, workspaceId: string, seq: number, acceptedAt: number): RuleOp {
  return toRuleOp(JSON.parse(text) as Command, workspaceId, seq, acceptedAt)
}
