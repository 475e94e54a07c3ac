/**
 * Database files → GeoIndex. Each file is opened, validated and walked once; a file given as
 * both the country and the ASN database (IPinfo Lite carries both) is walked once for both.
 * Building is a pure function of the bytes, so it can run in a worker thread.
 */
import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { ThreatfeedError } from '../errors.js'
import { GeoIndex, type GeoSourceInfo } from './geo-index.js'
import { openMmdb } from './mmdb-file.js'
import { MmdbFormatError } from './mmdb-format-error.js'
import { emptyTable, IntervalTableBuilder, type IntervalTableData } from './interval-table.js'
import type { DataDecoder } from './mmdb-data.js'
import { keyReaders, type KeyKind } from './record-keys.js'
import { walkSearchTree } from './tree-walk.js'

export interface GeoPaths {
  countryDb?: string | undefined
  asnDb?: string | undefined
}

export interface GeoSource {
  path: string
  buffer: Buffer
}

export interface GeoSources {
  country?: GeoSource | undefined
  asn?: GeoSource | undefined
}

/** Above this many data-section bytes the per-offset id cache is a Map, not an Int32Array. */
const ARRAY_CACHE_MAX = 1 << 22

/**
 * Builds the index from database bytes. Throws ThreatfeedError TF_ERR_GEO_LOAD [path, reason]
 * when a file is not a valid MaxMind DB or holds no key of the kind it was given for.
 * `opts.arrayCacheMax` moves the array/Map switch of the per-record cache (tests).
 *
 * @example
 *   const index = buildGeoIndex({ country: { path, buffer: readFileSync(path) } })
 */
export function buildGeoIndex (sources: GeoSources, opts: { arrayCacheMax?: number } = {}): GeoIndex {
  const cacheMax = opts.arrayCacheMax ?? ARRAY_CACHE_MAX
  const tables: Record<KeyKind, IntervalTableData> = { country: emptyTable(), asn: emptyTable() }
  const infos: GeoSourceInfo[] = []
  const { country, asn } = sources
  if (country !== undefined && asn !== undefined && (country.path === asn.path || country.buffer === asn.buffer)) {
    Object.assign(tables, indexFile(country, ['country', 'asn'], infos, cacheMax))
  } else {
    if (country !== undefined) Object.assign(tables, indexFile(country, ['country'], infos, cacheMax))
    if (asn !== undefined) Object.assign(tables, indexFile(asn, ['asn'], infos, cacheMax))
  }
  return new GeoIndex({ country: tables.country, asn: tables.asn, sources: infos })
}

/** Reads the files and builds the index (async file reads; the build itself is synchronous). */
export async function loadGeoIndex (paths: GeoPaths): Promise<GeoIndex> {
  const [country, asn] = await Promise.all([readSource(paths.countryDb), readSource(paths.asnDb)])
  return buildGeoIndex({ country, asn })
}

/** The synchronous twin of loadGeoIndex, for worker threads and start-up code. */
export function loadGeoIndexSync (paths: GeoPaths): GeoIndex {
  const read = (path: string | undefined): GeoSource | undefined => {
    if (path === undefined) return undefined
    try {
      return { path, buffer: readFileSync(path) }
    } catch (e) {
      throw readError(path, e)
    }
  }
  return buildGeoIndex({ country: read(paths.countryDb), asn: read(paths.asnDb) })
}

async function readSource (path: string | undefined): Promise<GeoSource | undefined> {
  if (path === undefined) return undefined
  try {
    return { path, buffer: await readFile(path) }
  } catch (e) {
    throw readError(path, e)
  }
}

// The reason is already in the message, so these errors carry no `cause` (the CLI would print
// it a second time).
function readError (path: string, e: unknown): ThreatfeedError {
  const err = e as NodeJS.ErrnoException
  const reason = err.code === 'ENOENT' ? 'file not found' : err.code === 'EISDIR' ? 'is a directory' : err.message
  return new ThreatfeedError('TF_ERR_GEO_LOAD', [path, reason])
}

/** Wraps format errors (and, defensively, any other throw from parsing) with the file's path. */
export function toGeoLoadError (path: string, e: unknown): ThreatfeedError {
  if (e instanceof ThreatfeedError) return e
  if (e instanceof MmdbFormatError) return new ThreatfeedError('TF_ERR_GEO_LOAD', [path, e.message])
  const reason = `unreadable database (${e instanceof Error ? e.message : String(e)})`
  return new ThreatfeedError('TF_ERR_GEO_LOAD', [path, reason], { cause: e })
}

function indexFile (source: GeoSource, kinds: readonly KeyKind[], infos: GeoSourceInfo[], cacheMax: number): Partial<Record<KeyKind, IntervalTableData>> {
  const { path, buffer } = source
  try {
    const file = openMmdb(buffer)
    const decoder = file.data
    const lanes = kinds.map((kind) => newLane(kind, decoder, file.metadata.nodeCount, cacheMax))
    const [a, b] = lanes
    // One lane (the usual case) or two (a file serving as both databases), unrolled: the visitor
    // runs once per network, 1.4 M times for DB-IP country.
    walkSearchTree(file, b === undefined
      ? {
          v4 (addr, len, data) { const id = a!.idAt(data); if (id >= 0) a!.builder.addV4(id, addr, len) },
          v6 (words, len, data) { const id = a!.idAt(data); if (id >= 0) a!.builder.addV6(id, words, len) },
        }
      : {
          v4 (addr, len, data) {
            let id = a!.idAt(data); if (id >= 0) a!.builder.addV4(id, addr, len)
            id = b.idAt(data); if (id >= 0) b.builder.addV4(id, addr, len)
          },
          v6 (words, len, data) {
            let id = a!.idAt(data); if (id >= 0) a!.builder.addV6(id, words, len)
            id = b.idAt(data); if (id >= 0) b.builder.addV6(id, words, len)
          },
        })
    const out: Partial<Record<KeyKind, IntervalTableData>> = {}
    for (const lane of lanes) {
      if (lane.builder.keyCount === 0) {
        const want = lane.kind === 'country' ? 'country (country.iso_code or country_code)' : 'ASN (autonomous_system_number or asn)'
        throw new MmdbFormatError(`no ${want} in any record; is this ${lane.kind === 'country' ? 'a country' : 'an ASN'} database? (database_type "${file.metadata.databaseType}")`)
      }
      out[lane.kind] = lane.builder.build()
      infos.push({ kind: lane.kind, path, databaseType: file.metadata.databaseType, buildEpoch: file.metadata.buildEpoch, nodeCount: file.metadata.nodeCount })
    }
    return out
  } catch (e) {
    throw toGeoLoadError(path, e)
  }
}

interface Lane {
  readonly kind: KeyKind
  readonly builder: IntervalTableBuilder
  /** Key id of the record at a data offset, -1 when it has no key of this kind. */
  idAt (data: number): number
}

/**
 * Many networks share one record (DB-IP country: 1.4 M networks, ~250 records), so each record's
 * key is read once and its id cached by data offset: in an array indexed by offset when the data
 * section is small, in a Map otherwise (a few MiB of data would mean tens of MiB of array).
 */
function newLane (kind: KeyKind, decoder: DataDecoder, nodeCount: number, cacheMax: number): Lane {
  const read = keyReaders[kind]
  const builder = new IntervalTableBuilder(nodeCount)
  const resolve = (data: number): number => {
    const key = read(decoder, data)
    return key < 0 ? -1 : builder.idOf(key)
  }
  if (decoder.size <= cacheMax) {
    const ids = new Int32Array(decoder.size).fill(-2) // -2: not read yet
    return {
      kind,
      builder,
      idAt (data) {
        let id = ids[data]!
        if (id === -2) ids[data] = id = resolve(data)
        return id
      },
    }
  }
  const ids = new Map<number, number>()
  return {
    kind,
    builder,
    idAt (data) {
      let id = ids.get(data)
      if (id === undefined) ids.set(data, id = resolve(data))
      return id
    },
  }
}
