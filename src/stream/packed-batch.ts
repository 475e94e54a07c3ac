/**
 * An appended batch as the consumer thread (consumer-thread.ts) is handed it: one binary buffer,
 * transferred rather than cloned, whose access-rule upserts without rule_ref — nearly every
 * command of a bulk import — are already in the embedded store's stored form, key and value.
 *
 *   u8 format (2) · str workspaceId · f64 acceptedAt · f64 first seq · u32 count
 *   count × ( u8 1 · u32 n · key (n bytes) · u32 m · value (m bytes) · f64 expiresAt (NaN: none)
 *           | u8 2 · str command as JSON )
 *
 * Why the stored form: the thread that applies is the one the sustained ingest rate waits for
 * (it does the B-tree writes), while the server's thread has time to spare between requests.
 * Encoding the key and value where the batch was accepted moves that work off the applying
 * thread, which then only writes bytes it is given (EncodedAccessUpsert). An earlier form
 * carried the commands as JSON columns: packing, unpacking and then encoding cost the two threads
 * more than encoding once (bench/ingest.ts, figures in consumer-thread.ts).
 *
 * The seqs of a batch run on by one from the first (what both stores' appends give); a batch
 * whose seqs do not is not packed (the consumer then reads it from the stream).
 */
import type { AppendedBatch } from '../ingest/batch.js'
import type { Command } from '../ingest/commands.js'
import type { RuleOp } from '../store/batch-types.js'
import { ByteReader, ByteWriter } from '../store/embedded/byte-writer.js'
import { writeAccessRuleKey } from '../store/embedded/key-layout.js'
import { encodeAccessRule } from '../store/embedded/rule-codec.js'
import { toRuleOp } from './apply.js'
import type { OfferedBatch } from './consumer.js'

const FORMAT = 2
const TAG = { encoded: 1, command: 2 } as const

const scratch = new ByteWriter(256 * 1024)

/**
 * The batch as one buffer to transfer; null when its seqs do not run on by one.
 *
 * @example
 *   const packed = packBatch(batch)
 *   if (packed !== null) worker.postMessage({ type: 'offer', batch: packed }, [packed])
 */
export function packBatch (batch: AppendedBatch): ArrayBuffer | null {
  const { workspaceId, acceptedAt, seqs, commands } = batch
  const first = seqs[0]
  if (first === undefined || seqs.length !== commands.length || seqs[seqs.length - 1] !== first + seqs.length - 1) return null
  const w = scratch
  w.reset()
  w.u8(FORMAT)
  w.str(workspaceId)
  w.f64(acceptedAt)
  w.f64(first)
  w.u32(commands.length)
  for (let i = 0; i < commands.length; i++) {
    const c = commands[i]!
    const op = toRuleOp(c, workspaceId, first + i, acceptedAt)
    if (op.op !== 'upsertAccessRule' || op.input.ruleRef !== null) {
      w.u8(TAG.command)
      w.str(JSON.stringify(c))
      continue
    }
    const { input } = op
    w.u8(TAG.encoded)
    lengthPrefixed(w, () => { writeAccessRuleKey(w, workspaceId, null, input.target) })
    // The times are set when the rule is applied (putEncodedAccessRule).
    lengthPrefixed(w, () => { encodeAccessRule(w, input, null, acceptedAt, acceptedAt) })
    w.f64(input.expiresAt ?? Number.NaN)
  }
  const out = new Uint8Array(w.pos)
  out.set(w.view())
  return out.buffer
}

function lengthPrefixed (w: ByteWriter, write: () => void): void {
  w.u32(0)
  const at = w.pos
  write()
  w.u32At(at - 4, w.pos - at)
}

/**
 * A packed batch as the consumer takes it: its seqs now, its store operations (in order; keys and
 * values are views of `packed`) when its pass comes. Throws RangeError on a buffer that is not a
 * packed batch, now for its header and at pushOps for the rest. pushOps may be called again (a
 * retried pass) and pushes the same operations each time.
 *
 * @example
 *   consumer.offerPrepared(unpackBatch(message.batch))
 */
export function unpackBatch (packed: ArrayBuffer): OfferedBatch {
  const r = new ByteReader(Buffer.from(packed))
  if (r.u8() !== FORMAT) throw new RangeError('not a packed batch')
  const workspaceId = r.str()
  const acceptedAt = r.f64()
  const first = r.f64()
  const count = r.u32()
  // A fresh reader each call: a pass whose apply failed pushes the same batch's ops again.
  const opsAt = r.pos
  return { first, count, pushOps: (out) => { readOps(new ByteReader(r.buf, opsAt), workspaceId, acceptedAt, first, count, out) } }
}

function readOps (r: ByteReader, workspaceId: string, acceptedAt: number, first: number, count: number, out: RuleOp[]): void {
  for (let i = 0; i < count; i++) {
    const tag = r.u8()
    if (tag === TAG.command) {
      out.push(toRuleOp(JSON.parse(r.str()) as Command, workspaceId, first + i, acceptedAt))
      continue
    }
    if (tag !== TAG.encoded) throw new RangeError(`unknown tag ${tag}`)
    const key = r.bytes()
    const value = r.bytes()
    const expiresAt = r.f64()
    out.push({ op: 'putEncodedAccessRule', workspaceId, key, value, expiresAt: Number.isNaN(expiresAt) ? null : expiresAt })
  }
  if (r.pos !== r.buf.length) throw new RangeError('packed batch has trailing bytes')
}
