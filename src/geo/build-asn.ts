/**
 * ASN CSV → GeoLite2-ASN-schema MMDB (`threatfeed geo build-asn`, and the embedded default of
 * DECISIONS §1). Records are `{autonomous_system_number: uint32, autonomous_system_organization:
 * utf8}`, one per distinct (ASN, organization); IPv4 rows go to ::/96 of the IPv6 tree; each
 * inclusive range becomes the fewest CIDR prefixes that cover it.
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { Presets, SingleBar } from 'cli-progress'
import { ThreatfeedError } from '../errors.js'
import { forEachAsnCsvRow } from './asn-csv.js'
import { mmdbUint32 } from './mmdb-encoder.js'
import { MmdbWriter } from './mmdb-writer.js'

export interface AsnSource {
  path: string
  buffer: Buffer
}

export interface BuildAsnOptions {
  /** Seconds since the epoch for the metadata; defaults to now. */
  buildEpoch?: number
  /** Smallest record size of the file (tests write all three). */
  minRecordSize?: 24 | 28 | 32
  /** Called with (bytes parsed, total bytes) as the CSVs are read. */
  onProgress?: (done: number, total: number) => void
}

export interface BuildAsnStats {
  rows: number
  /** CIDR prefixes inserted. */
  networks: number
  /** Distinct (ASN, organization) records. */
  records: number
  /** Rows left out: ASN 0 (RFC 7607, "no AS") or IPv6 ranges inside the IPv4 space of the tree. */
  skipped: number
  bytes: number
}

/**
 * Builds the MMDB in memory from CSV bytes (a pure function, for tests and workers).
 *
 * @example
 *   const { buffer } = buildAsnMmdb([{ path: 'asn.csv', buffer: Buffer.from('1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."\n') }])
 */
export function buildAsnMmdb (sources: readonly AsnSource[], opts: BuildAsnOptions = {}): { buffer: Buffer, stats: BuildAsnStats } {
  const writer = new MmdbWriter({
    databaseType: 'GeoLite2-ASN',
    description: { en: 'threatfeed ASN database built from ' + sources.map((s) => s.path.split('/').pop()).join(', ') },
    languages: ['en'],
    ...(opts.buildEpoch !== undefined ? { buildEpoch: opts.buildEpoch } : {}),
    ...(opts.minRecordSize !== undefined ? { minRecordSize: opts.minRecordSize } : {}),
  })
  // (ASN, organization) → record; most ASNs have one organization, so the first level is by number.
  const byAsn = new Map<number, { org: string, ref: number }>()
  const byBoth = new Map<string, number>()
  const recordOf = (asn: number, org: string): number => {
    const first = byAsn.get(asn)
    if (first !== undefined && first.org === org) return first.ref
    const key = `${asn}\n${org}`
    let ref = byBoth.get(key)
    if (ref === undefined) {
      ref = writer.record(org === ''
        ? { autonomous_system_number: mmdbUint32(asn) }
        : { autonomous_system_number: mmdbUint32(asn), autonomous_system_organization: org })
      byBoth.set(key, ref)
      if (first === undefined) byAsn.set(asn, { org, ref })
    }
    return ref
  }
  const total = sources.reduce((n, s) => n + s.buffer.length, 0)
  let before = 0
  const stats: BuildAsnStats = { rows: 0, networks: 0, records: 0, skipped: 0, bytes: 0 }
  for (const src of sources) {
    stats.rows += forEachAsnCsvRow(src.buffer, src.path, (row) => {
      if (row.asn === 0) { stats.skipped++; return }
      if (row.family === 4) {
        writer.insertRangeV4(row.first4, row.last4, recordOf(row.asn, row.org))
      } else if (writer.rangeOverlapsIpv4Space(row.words, 0, row.words, 4)) {
        stats.skipped++
      } else {
        writer.insertRangeV6(row.words, 0, row.words, 4, recordOf(row.asn, row.org))
      }
    }, opts.onProgress === undefined ? undefined : (done) => opts.onProgress!(before + done, total))
    before += src.buffer.length
  }
  const buffer = writer.toBuffer()
  stats.networks = writer.networkCount
  stats.records = writer.recordCount
  stats.bytes = buffer.length
  return { buffer, stats }
}

/**
 * Reads the CSV files, builds the MMDB and writes it to `out` atomically (temporary file, then
 * rename), with a progress bar on `progress` when given (the CLI passes stderr when it is a TTY).
 */
export function writeAsnMmdb (csv: readonly string[], out: string, opts: BuildAsnOptions & { progress?: NodeJS.WritableStream | undefined } = {}): BuildAsnStats {
  const sources = csv.map((path) => {
    try {
      return { path, buffer: readFileSync(path) }
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      throw new ThreatfeedError('TF_ERR_GEO_LOAD', [path, code === 'ENOENT' ? 'file not found' : (e as Error).message], { cause: e })
    }
  })
  let bar: SingleBar | undefined
  if (opts.progress !== undefined) {
    bar = new SingleBar({
      stream: opts.progress,
      format: 'building ASN database |{bar}| {percentage}% | {value}/{total} MiB',
      hideCursor: true,
    }, Presets.shades_classic)
    bar.start(mib(sources.reduce((n, s) => n + s.buffer.length, 0)), 0)
  }
  const onProgress = bar === undefined ? opts.onProgress : (done: number, total: number) => { bar.update(mib(done)); opts.onProgress?.(done, total) }
  try {
    const { buffer, stats } = buildAsnMmdb(sources, { ...opts, ...(onProgress !== undefined ? { onProgress } : {}) })
    writeFileAtomic(out, buffer)
    return stats
  } finally {
    bar?.stop()
  }
}

/** Writes through a temporary file in the same directory and renames, so readers never see half a file. */
export function writeFileAtomic (path: string, data: Buffer | string): void {
  mkdirSync(dirname(path), { recursive: true })
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`
  try {
    writeFileSync(tmp, data)
    renameSync(tmp, path)
  } catch (e) {
    rmSync(tmp, { force: true })
    throw e
  }
}

function mib (bytes: number): number {
  return Math.round(bytes / 2 ** 20 * 10) / 10
}
