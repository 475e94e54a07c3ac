/**
 * The embedded store's packed batch: an appended batch as its consumer thread is handed it (one
 * buffer, transferred rather than cloned), whose access-rule upserts without rule_ref — nearly
 * every command of a bulk import — are already in the stored form, key and value.
 *
 *   u8 format (2) · str workspaceId · f64 acceptedAt · f64 first seq · u32 count
 *   count × ( u8 1 · u32 n · key (n bytes) · u32 m · value (m bytes) · f64 expiresAt (NaN: none)
 *           | u8 2 · str text (the caller's, for an op with no stored form; see FromText) )
 *
 * Why the stored form: the thread that applies is the one the sustained ingest rate waits for
 * (it does the B-tree writes), while the server's thread has time to spare between requests.
 * Encoding the key and value where the batch was accepted moves that work off the applying
 * thread, which then only writes bytes it is given (EncodedAccessUpsert). An earlier form
 * carried the commands as JSON columns: packing, unpacking and then encoding cost the two threads
 * more than encoding once (bench/ingest.ts, figures in src/stream/consumer-thread.ts).
 */
import type { RuleOp } from '../batch-types.js'
import type { BatchPacker, FromText, UnpackedBatch } from '../consumer-thread.js'
import { ByteReader, ByteWriter } from './byte-writer.js'
import { writeAccessRuleKey } from './key-layout.js'
import { encodeAccessRule } from './rule-codec.js'

/**
 * An upsert of an access rule without rule_ref in its stored form: its target key (key-layout.ts
 * writeAccessRuleKey: its identity, and where format 4 stored it) and the value upsertAccessRule
 * would write (rule-codec.ts; its creation and update times are set when it is applied). Only the consumer thread's batches carry it (unpackBatch); it is this
 * store's own op, not one of the shared RuleOps.
 */
export interface EncodedAccessUpsert {
  readonly op: 'putEncodedAccessRule'
  readonly workspaceId: string
  readonly key: Buffer
  readonly value: Buffer
  readonly expiresAt: number | null
}

/** What the embedded store's applyRuleBatch takes: the shared ops and its own. */
export type EmbeddedRuleOp = RuleOp | EncodedAccessUpsert

const FORMAT = 2
const TAG = { encoded: 1, text: 2 } as const

/** Packs into one scratch buffer (one batch at a time, synchronously), copied out once at finish. */
export class EmbeddedBatchPacker implements BatchPacker {
  readonly #w = new ByteWriter(256 * 1024)
  #workspaceId = ''
  #acceptedAt = 0

  start (workspaceId: string, acceptedAt: number, first: number, count: number): void {
    const w = this.#w
    w.reset()
    w.u8(FORMAT)
    w.str(workspaceId)
    w.f64(acceptedAt)
    w.f64(first)
    w.u32(count)
    this.#workspaceId = workspaceId
    this.#acceptedAt = acceptedAt
  }

  addOp (op: RuleOp): boolean {
    if (op.op !== 'upsertAccessRule' || op.input.ruleRef !== null) return false
    const { input } = op
    const w = this.#w
    w.u8(TAG.encoded)
    w.u32(0)
    let at = w.pos
    writeAccessRuleKey(w, this.#workspaceId, null, input.target)
    w.u32At(at - 4, w.pos - at)
    w.u32(0)
    at = w.pos
    // The times are set when the rule is applied (putEncodedAccessRule).
    encodeAccessRule(w, input, null, this.#acceptedAt, this.#acceptedAt)
    w.u32At(at - 4, w.pos - at)
    w.f64(input.expiresAt ?? Number.NaN)
    return true
  }

  addText (text: string): void {
    this.#w.u8(TAG.text)
    this.#w.str(text)
  }

  finish (): ArrayBuffer {
    const w = this.#w
    // Not zero-filled first (it is overwritten whole), and a buffer of its own, never Buffer's
    // shared pool: it is transferred.
    const out = Buffer.allocUnsafeSlow(w.pos)
    w.view().copy(out)
    return out.buffer
  }
}

/**
 * A packed batch as the consumer thread takes it: its seqs now, its ops (keys and values are
 * views of `packed`) when its pass comes. Throws RangeError on a buffer that is not a packed
 * batch, now for its header and at pushOps for the rest. pushOps may be called again (a retried
 * pass) and pushes the same operations each time.
 *
 * @example
 *   consumer.offerPrepared(unpackBatch(message.batch, fromText))
 */
export function unpackBatch (packed: ArrayBuffer, fromText: FromText): UnpackedBatch<EncodedAccessUpsert> {
  const r = new ByteReader(Buffer.from(packed))
  if (r.u8() !== FORMAT) throw new RangeError('not a packed batch')
  const workspaceId = r.str()
  const acceptedAt = r.f64()
  const first = r.f64()
  const count = r.u32()
  // A fresh reader each call: a pass whose apply failed pushes the same batch's ops again.
  const opsAt = r.pos
  return { first, count, pushOps: (out) => { readOps(new ByteReader(r.buf, opsAt), workspaceId, acceptedAt, first, count, fromText, out) } }
}

function readOps (r: ByteReader, workspaceId: string, acceptedAt: number, first: number, count: number, fromText: FromText, out: EmbeddedRuleOp[]): void {
  for (let i = 0; i < count; i++) {
    const tag = r.u8()
    if (tag === TAG.text) {
      out.push(fromText(r.str(), workspaceId, first + i, acceptedAt))
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
