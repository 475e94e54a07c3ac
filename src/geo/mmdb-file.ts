/**
 * The layout of a MaxMind DB file, validated before anything reads it (MaxMind DB format 2.0):
 *
 *   +-------------------+----------------+--------------+--------------------------+----------+
 *   | search tree       | 16 zero bytes  | data section | "\xAB\xCD\xEFMaxMind.com" | metadata |
 *   | node_count nodes  | (separator)    |              | (last occurrence)        | (a map)  |
 *   +-------------------+----------------+--------------+--------------------------+----------+
 *
 * A node is two records of record_size bits (24, 28 or 32); a record below node_count is a
 * node, equal to it means "no data", above it points into the data section at
 * `record - node_count - 16`. Checking the separator catches a wrong node_count early: the
 * bytes where it should be are tree or data bytes instead.
 */
import { DataDecoder } from './mmdb-data.js'
import { check, MmdbFormatError } from './mmdb-format-error.js'

export const METADATA_MARKER = Buffer.from('abcdef4d61784d696e642e636f6d', 'hex')
/** The spec bounds metadata, marker included, to 128 KiB. */
const METADATA_MAX_BYTES = 128 * 1024
export const SEPARATOR_BYTES = 16

export type RecordSize = 24 | 28 | 32

export interface MmdbMetadata {
  readonly nodeCount: number
  readonly recordSize: RecordSize
  readonly ipVersion: 4 | 6
  readonly databaseType: string
  readonly languages: readonly string[]
  readonly description: Readonly<Record<string, string>>
  readonly binaryFormatMajorVersion: number
  readonly binaryFormatMinorVersion: number
  /** Seconds since the epoch. */
  readonly buildEpoch: number
}

type RecordReader = (buf: Buffer, node: number) => number

// One reader pair per record size, picked once when the file opens (mmdb-lib's walker does the
// same), so the walk's inner loop has no switch.
const readers: Record<RecordSize, readonly [RecordReader, RecordReader]> = {
  24: [
    (b, n) => { const o = n * 6; return (b[o]! << 16) | (b[o + 1]! << 8) | b[o + 2]! },
    (b, n) => { const o = n * 6 + 3; return (b[o]! << 16) | (b[o + 1]! << 8) | b[o + 2]! },
  ],
  28: [
    (b, n) => { const o = n * 7; return ((b[o + 3]! & 0xf0) * 0x100000) + ((b[o]! << 16) | (b[o + 1]! << 8) | b[o + 2]!) },
    (b, n) => { const o = n * 7; return ((b[o + 3]! & 0x0f) * 0x1000000) + ((b[o + 4]! << 16) | (b[o + 5]! << 8) | b[o + 6]!) },
  ],
  32: [
    (b, n) => b.readUInt32BE(n * 8),
    (b, n) => b.readUInt32BE(n * 8 + 4),
  ],
}

/**
 * An opened, layout-checked database. Opening reads only the metadata; the records and data are
 * read on demand, with every record checked by the walker and every data access by DataDecoder.
 *
 * @example
 *   const file = openMmdb(readFileSync('GeoLite2-Country.mmdb'))
 *   file.metadata.ipVersion // 6
 */
export class MmdbFile {
  readonly buf: Buffer
  readonly metadata: MmdbMetadata
  /** Bytes of the search tree (node_count × record_size / 4). */
  readonly treeSize: number
  readonly data: DataDecoder
  readonly left: (node: number) => number
  readonly right: (node: number) => number

  constructor (buf: Buffer, metadata: MmdbMetadata, treeSize: number, data: DataDecoder) {
    this.buf = buf
    this.metadata = metadata
    this.treeSize = treeSize
    this.data = data
    const [l, r] = readers[metadata.recordSize]
    this.left = (node) => l(buf, node)
    this.right = (node) => r(buf, node)
  }
}

/** Opens and validates a database held in memory; throws MmdbFormatError with the reason. */
export function openMmdb (buf: Buffer): MmdbFile {
  if (buf.length <= METADATA_MARKER.length) throw new MmdbFormatError(`file is too small to be a MaxMind DB (${buf.length} bytes)`)
  const marker = buf.lastIndexOf(METADATA_MARKER)
  check(marker >= 0, 'no MaxMind DB metadata marker ("\\xAB\\xCD\\xEFMaxMind.com"): not a MaxMind DB file')
  check(buf.length - marker <= METADATA_MAX_BYTES, 'metadata marker is more than 128 KiB before the end of the file')
  const metaStart = marker + METADATA_MARKER.length
  const metadata = parseMetadata(new DataDecoder(buf, metaStart, buf.length - metaStart))
  const { nodeCount, recordSize } = metadata
  const treeSize = nodeCount * recordSize / 4
  check(treeSize + SEPARATOR_BYTES <= marker,
    `node_count ${nodeCount} needs a ${treeSize}-byte search tree, but the data section ends at byte ${marker}`)
  for (let i = treeSize; i < treeSize + SEPARATOR_BYTES; i++) {
    if (buf[i] !== 0) throw new MmdbFormatError(`no 16-byte zero separator after the search tree at byte ${treeSize} (node_count ${nodeCount} does not match the file)`)
  }
  const dataStart = treeSize + SEPARATOR_BYTES
  return new MmdbFile(buf, metadata, treeSize, new DataDecoder(buf, dataStart, marker - dataStart))
}

function parseMetadata (decoder: DataDecoder): MmdbMetadata {
  let m: unknown
  try {
    m = decoder.decode(0)
  } catch (e) {
    if (e instanceof MmdbFormatError) throw new MmdbFormatError(`corrupt metadata: ${e.message}`)
    throw e
  }
  check(isRecord(m), 'metadata is not a map')
  const nodeCount = m.node_count
  const recordSize = m.record_size
  const ipVersion = m.ip_version
  const major = m.binary_format_major_version
  check(typeof nodeCount === 'number' && Number.isInteger(nodeCount) && nodeCount > 0 && nodeCount < 2 ** 32,
    `metadata node_count is missing or invalid (${String(nodeCount)})`)
  check(recordSize === 24 || recordSize === 28 || recordSize === 32,
    `metadata record_size must be 24, 28 or 32 (got ${String(recordSize)})`)
  if (nodeCount >= 2 ** recordSize) throw new MmdbFormatError(`node_count ${nodeCount} does not fit ${recordSize}-bit records`)
  if (ipVersion !== 4 && ipVersion !== 6) throw new MmdbFormatError(`metadata ip_version must be 4 or 6 (got ${String(ipVersion)})`)
  if (major !== 2) throw new MmdbFormatError(`unsupported binary format major version ${String(major)} (this reader knows 2)`)
  const languages = Array.isArray(m.languages) ? m.languages.filter((l): l is string => typeof l === 'string') : []
  const description: Record<string, string> = {}
  if (isRecord(m.description)) {
    for (const [k, v] of Object.entries(m.description)) if (typeof v === 'string') description[k] = v
  }
  return Object.freeze({
    nodeCount,
    recordSize,
    ipVersion,
    databaseType: typeof m.database_type === 'string' ? m.database_type : '',
    languages: Object.freeze(languages),
    description: Object.freeze(description),
    binaryFormatMajorVersion: major,
    binaryFormatMinorVersion: typeof m.binary_format_minor_version === 'number' ? m.binary_format_minor_version : 0,
    buildEpoch: typeof m.build_epoch === 'number' ? m.build_epoch : Number(m.build_epoch ?? 0),
  })
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v)
}
