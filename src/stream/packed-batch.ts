/**
 * An appended batch packed for a store's consumer thread (../store/consumer-thread.ts): each
 * command becomes its rule op here, on the server's thread, and the store packs the op in its own
 * stored form when it has one; a command it cannot pre-encode travels as its JSON and is made into
 * its op again on the thread (commandFromText).
 *
 * The seqs of a batch run on by one from the first (what both stores' appends give); a batch
 * whose seqs do not is not packed (the consumer then reads it from the stream).
 */
import type { AppendedBatch } from '../ingest/batch.js'
import type { Command } from '../ingest/commands.js'
import type { RuleOp } from '../store/batch-types.js'
import type { BatchPacker } from '../store/consumer-thread.js'
import { toRuleOp } from './apply.js'

/**
 * The batch as one buffer to transfer; null when its seqs do not run on by one.
 *
 * @example
 *   const packed = packBatch(handoff.packer, batch)
 *   if (packed !== null) worker.postMessage({ type: 'offer', batch: packed }, [packed])
 */
export function packBatch (packer: BatchPacker, batch: AppendedBatch): ArrayBuffer | null {
  const { workspaceId, acceptedAt, seqs, commands } = batch
  const first = seqs[0]
  if (first === undefined || seqs.length !== commands.length || seqs[seqs.length - 1] !== first + seqs.length - 1) return null
  packer.start(workspaceId, acceptedAt, first, commands.length)
  for (let i = 0; i < commands.length; i++) {
    const c = commands[i]!
    if (!packer.addOp(toRuleOp(c, workspaceId, first + i, acceptedAt))) packer.addText(JSON.stringify(c))
  }
  return packer.finish()
}

/** The thread's side of packBatch's text: the command's op (FromText). */
export function commandFromText (text: string, workspaceId: string, seq: number, acceptedAt: number): RuleOp {
  return toRuleOp(JSON.parse(text) as Command, workspaceId, seq, acceptedAt)
}
