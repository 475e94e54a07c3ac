/**
 * The stored form of the signal stream: one LMDB entry per append (a "chunk"), keyed by the
 * chunk's first seq, holding every record of that append.
 *
 * One entry per record cost a B-tree insert each — about a fifth of the LMDB time of an ingest
 * batch (bench/ingest.ts --cpu-prof) — and its JSON tuple escaped every quote of a v1 payload,
 * which is itself JSON. A chunk is one insert per batch, and payloads are stored as their UTF-8
 * bytes, so a v1 record is still byte for byte the entry the client sent (DECISIONS §3).
 *
 *   u8 format (1) · u32 count · count × record
 *   record: u8 flags · [f64 acceptedAt · str workspaceId] · [u32 schemaVersion] · str payload
 *
 * flags: 1 = schemaVersion present (absent is a v1 record), 2 = same workspace and acceptedAt as
 * the record before (the usual case: an append is one ingest batch).
 *
 * A whole v1 batch (types.ts WholeV1Batch) is a chunk of its own form, the body as it came:
 *
 *   u8 format (2) · u32 count · f64 acceptedAt · str workspaceId · u32 length · body
 *
 * and is split into its records when read (whole-v1-batch.ts).
 *
 * A chunk written with a batch id (the ingest batch that appended it) has BATCH_ID set in its
 * format byte and the id's 16 bytes right after it; the rest is as above. Chunks written before
 * batch ids existed have no such bit and read back without one.
 */
import type { StreamRecord, StreamRecordInput, WholeV1Batch } from '../types.js'
import { wholeBatchTexts } from '../whole-v1-batch.js'
import { ByteReader, type ByteWriter } from './byte-writer.js'
import { isUuid, readUuid, writeUuid } from './uuid-bytes.js'

const RECORDS = 1
const WHOLE_V1 = 2
/** In the format byte: a 16-byte batch id follows it. */
const BATCH_ID = 0x80
const HAS_VERSION = 1
const SAME_ORIGIN = 2

/** A reader that keeps the chunk's batch id once readFormat has read it. */
class ChunkReader extends ByteReader {
  batchId: string | undefined = undefined
}

/**
 * Writes `records` as one chunk into `w` (from w.pos).
 *
 * @example
 *   w.reset(); encodeChunk(w, records); dbs.stream.put(firstSeq, w.view())
 */
export function encodeChunk (w: ByteWriter, records: readonly StreamRecordInput[], batchId?: string): void {
  writeFormat(w, RECORDS, batchId)
  w.u32(records.length)
  let workspaceId: string | null = null
  let acceptedAt = Number.NaN
  for (const r of records) {
    const same = r.workspaceId === workspaceId && r.acceptedAt === acceptedAt
    const version = r.schemaVersion
    if (version !== undefined && (!Number.isInteger(version) || version < 0 || version > 0xffffffff)) {
      throw new TypeError(`schemaVersion must be a 32-bit unsigned integer (got ${version})`)
    }
    w.u8((version !== undefined ? HAS_VERSION : 0) | (same ? SAME_ORIGIN : 0))
    if (!same) {
      w.f64(r.acceptedAt)
      w.str(r.workspaceId)
      workspaceId = r.workspaceId
      acceptedAt = r.acceptedAt
    }
    if (version !== undefined) w.u32(version)
    w.str(r.payload)
  }
}

/** Writes a whole v1 batch as one chunk into `w` (from w.pos): a copy of its body. */
export function encodeWholeV1Chunk (w: ByteWriter, batch: WholeV1Batch, batchId?: string): void {
  writeFormat(w, WHOLE_V1, batchId)
  w.u32(batch.count)
  w.f64(batch.acceptedAt)
  w.str(batch.workspaceId)
  w.u32(batch.body.length)
  w.bytes(batch.body)
}

/** Records in a chunk (without decoding them). */
export function chunkCount (buf: Buffer): number {
  const r = new ChunkReader(buf)
  readFormat(r)
  return r.u32()
}

/** The latest acceptedAt of a chunk's records (the trim's age test), without their payloads. */
export function chunkLatestAcceptedAt (buf: Buffer): number {
  const r = new ChunkReader(buf)
  const format = readFormat(r)
  const count = r.u32()
  if (format === WHOLE_V1) return r.f64()
  let latest = -Infinity
  for (let i = 0; i < count; i++) {
    const flags = r.u8()
    if ((flags & SAME_ORIGIN) === 0) {
      latest = Math.max(latest, r.f64())
      r.bytes() // the workspace id
    }
    if ((flags & HAS_VERSION) !== 0) r.u32()
    r.bytes() // the payload
  }
  return latest
}

/**
 * Appends to `out` the records of the chunk whose first seq is `firstSeq`, from seq `from` on,
 * until `out` holds `limit` records.
 */
export function decodeChunk (buf: Buffer, firstSeq: number, from: number, limit: number, out: StreamRecord[]): void {
  const r = new ChunkReader(buf)
  const format = readFormat(r)
  const batchId = r.batchId
  const count = r.u32()
  if (format === WHOLE_V1) {
    decodeWholeV1(r, count, firstSeq, from, limit, out, batchId)
    return
  }
  let workspaceId = ''
  let acceptedAt = 0
  for (let i = 0; i < count && out.length < limit; i++) {
    const flags = r.u8()
    if ((flags & SAME_ORIGIN) === 0) {
      acceptedAt = r.f64()
      workspaceId = r.str()
    }
    const version = (flags & HAS_VERSION) !== 0 ? r.u32() : undefined
    const seq = firstSeq + i
    if (seq < from) {
      const bytes = r.u32() // skip the payload without decoding it
      r.pos += bytes
      continue
    }
    const payload = r.str()
    // v1 records carry no schemaVersion at all (not even `undefined`), as types.ts describes them.
    const record: StreamRecord = version === undefined
      ? { seq, workspaceId, payload, acceptedAt }
      : { seq, workspaceId, schemaVersion: version, payload, acceptedAt }
    if (batchId !== undefined) record.batchId = batchId
    out.push(record)
  }
}

function decodeWholeV1 (r: ChunkReader, count: number, firstSeq: number, from: number, limit: number, out: StreamRecord[], batchId: string | undefined): void {
  const acceptedAt = r.f64()
  const workspaceId = r.str()
  const body = r.bytes()
  if (r.pos !== r.buf.length) throw new RangeError('a whole v1 batch chunk with bytes after its body')
  // Nothing to split when every record wanted is past this chunk.
  if (firstSeq + count <= from) return
  const texts = wholeBatchTexts(body, count)
  for (let i = Math.max(0, from - firstSeq); i < count && out.length < limit; i++) {
    const record: StreamRecord = { seq: firstSeq + i, workspaceId, payload: texts[i]!, acceptedAt }
    if (batchId !== undefined) record.batchId = batchId
    out.push(record)
  }
}

/** The batch id of a chunk (undefined for one written without), without decoding its records. */
export function chunkBatchId (buf: Buffer): string | undefined {
  const r = new ChunkReader(buf)
  readFormat(r)
  return r.batchId
}

function writeFormat (w: ByteWriter, format: number, batchId: string | undefined): void {
  if (batchId === undefined) {
    w.u8(format)
    return
  }
  if (!isUuid(batchId)) throw new TypeError(`a batch id must be a canonical UUID (got ${JSON.stringify(batchId)})`)
  w.u8(format | BATCH_ID)
  writeUuid(w, batchId)
}

/** The chunk's format; its batch id, when it has one, is read too and left in `r.batchId`. */
function readFormat (r: ChunkReader): number {
  const byte = r.u8()
  const format = byte & ~BATCH_ID
  if (format !== RECORDS && format !== WHOLE_V1) throw new RangeError(`stream chunk of unknown format ${byte}`)
  r.batchId = (byte & BATCH_ID) !== 0 ? readUuid(r) : undefined
  return format
}

