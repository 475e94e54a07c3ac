/**
 * Environment → one frozen, validated Config. A bad value stops the process with a message that
 * names the variable (DECISIONS §1). Nothing else in the service reads process.env.
 */
import { resolve } from 'node:path'
import { availableParallelism } from 'node:os'
import { ThreatfeedError } from './errors.js'
import { TOMBSTONE_MAX } from './store/types.js'
import { DEFAULT_CONSUMER_STALE_MS } from './feed/consumer-status.js'
import { DEFAULT_CONSUMERS_PER_KEY, MAX_TRACKED_CONSUMERS } from './store/consumer-record.js'
import { parseTrustedProxies } from './http/consumer-address.js'
import { BATCH_JOURNAL_MAX, BATCH_JOURNAL_RETENTION_MS } from './http/admin-journal.js'

/** The HTTPS listener (README "HTTPS"); null in Config when THREATFEED_TLS_CERT is unset. */
export interface TlsConfig {
  readonly port: number
  /** PEM: the server certificate first, then its chain. */
  readonly certFile: string
  /** PEM private key (RSA or EC), encrypted when `passphrase` is set. */
  readonly keyFile: string
  readonly passphrase: string | null
  /** PEM CA certificates; when set, every request on the TLS listener needs a client certificate they signed. */
  readonly clientCaFile: string | null
  /** How often the files are read for a change; null: only on SIGHUP. */
  readonly reloadMs: number | null
}

export interface Config {
  readonly host: string
  /** The plain HTTP listener's port; null: `PORT=off` (HTTPS only). */
  readonly port: number | null
  readonly tls: TlsConfig | null
  readonly dataDir: string
  readonly store: 'embedded' | 'mongodb'
  readonly mongodbUri: string | null
  readonly mongodbDb: string
  /** Least time between two rebuilds of one feed (SPEC §8: 30 s). */
  readonly feedRebuildMs: number
  readonly geoCountryDb: string | null
  readonly geoAsnDb: string | null
  readonly maxBodyBytes: number
  /** Token bucket per API key: sustained requests per second and burst size. */
  readonly rateLimitPerSecond: number
  readonly rateLimitBurst: number
  /** How often the server polls the store for changes made by other processes (CLI, other nodes). */
  readonly pollMs: number
  /** Worker threads of the feed/geo pool. */
  readonly workers: number
  readonly logLevel: string
  /** Grace period for SIGTERM (DECISIONS §6: exit within 10 s). */
  readonly shutdownMs: number
  /** How often lapsed rules are swept from the store and the stream trimmed; null: never, by this process. */
  readonly sweepIntervalMs: number | null
  /** Stream records applied by every consumer are kept this long after they were accepted. */
  readonly streamRetentionMs: number
  /** Tombstones of swept rules kept at most (besides their day), oldest dropped first. */
  readonly tombstoneMax: number
  /** Feed consumers are counted and flushed to the store (THREATFEED_CONSUMER_TRACKING, issue 20). */
  readonly consumerTracking: boolean
  /** A consumer silent this long (or three of its median intervals, if longer) is stale. */
  readonly consumerStaleMs: number
  /** Most consumers one key can have tracked, in memory and in the store (THREATFEED_CONSUMERS_PER_KEY). */
  readonly consumersPerKey: number
  /** Peers whose X-Forwarded-For names the client: canonical CIDRs. */
  readonly trustedProxies: readonly string[]
  /** Front-end threads answering HTTP on the same ports (README "Architecture"); 1: the main thread alone. */
  readonly httpThreads: number
  /**
   * How many nice steps below the process the background threads run (pool/thread-priority.ts):
   * the feed build workers, the stream consumer and, with front-end threads, the main thread. 0: off.
   */
  readonly backgroundNice: number
  /** Signal batch reports kept per workspace for /v1/admin/batches (issue 22); 0: none recorded. */
  readonly batchJournalMax: number
  /** How long a batch report is kept. */
  readonly batchJournalRetentionMs: number
  /** Feed versions kept per feed for deltas (`?since=`, docs/deltas.md); 0: deltas off (every `since` answers full). */
  readonly deltaHistory: number
  /** A kept version older than this answers full. */
  readonly deltaMaxAgeMs: number
  /** The longest duration a CrowdSec bouncer is told to keep a decision (docs/bouncers.md). */
  readonly bouncerMaxDurationMs: number
}

type Env = Record<string, string | undefined>

function fail (name: string, why: string): never {
  throw new ThreatfeedError('TF_ERR_CONFIG', [`${name} ${why}`])
}

function int (env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return dflt
  if (!/^\d+$/.test(raw)) fail(name, `must be a whole number, got ${JSON.stringify(raw)}`)
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n < min || n > max) fail(name, `must be between ${min} and ${max}, got ${raw}`)
  return n
}

function oneOf<T extends string> (env: Env, name: string, values: readonly T[], dflt: T): T {
  const raw = env[name]
  if (raw === undefined || raw === '') return dflt
  if (!(values as readonly string[]).includes(raw)) fail(name, `must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`)
  return raw as T
}

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

/**
 * A duration such as `90s`, `15m`, `12h`, `7d` (also `ms`) in milliseconds, or null when the
 * text is not one. The one duration syntax of threatfeed's settings.
 *
 * @example
 *   parseDuration('15m') // 900000
 */
export function parseDuration (text: string): number | null {
  const m = /^(\d{1,9})(ms|s|m|h|d)$/.exec(text)
  if (m === null) return null
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS]
}

function duration (env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return dflt
  const ms = parseDuration(raw)
  if (ms === null) fail(name, `must be a duration such as 90s, 15m, 12h or 7d, got ${JSON.stringify(raw)}`)
  if (ms < min || ms > max) fail(name, `must be between ${showMs(min)} and ${showMs(max)}, got ${raw}`)
  return ms
}

/** A duration, or null for `off` (another process sharing the store does the work). */
function durationOrOff (env: Env, name: string, dflt: number, min: number, max: number): number | null {
  const raw = env[name]
  if (raw === 'off') return null
  if (raw !== undefined && raw !== '' && parseDuration(raw) === null) fail(name, `must be a duration such as 90s, 15m, 12h or 7d, or off, got ${JSON.stringify(raw)}`)
  return duration(env, name, dflt, min, max)
}

function showMs (ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) if (ms % UNIT_MS[unit] === 0 && ms >= UNIT_MS[unit]) return `${ms / UNIT_MS[unit]}${unit}`
  return `${ms}ms`
}

function str (env: Env, name: string, dflt: string | null): string | null {
  const raw = env[name]
  if (raw === undefined || raw === '') return dflt
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  if (/[\0-\x1f]/.test(raw)) fail(name, 'must not contain control characters')
  return raw
}

function trustedProxies (env: Env, name: string): readonly string[] {
  const parsed = parseTrustedProxies(env[name] ?? '')
  if (!parsed.ok) fail(name, `must be a list of CIDRs or addresses separated by commas, got ${JSON.stringify(parsed.bad)}`)
  return Object.freeze(parsed.cidrs)
}

/**
 * The TLS settings: the certificate and key come together, and the listener that needs neither
 * (PORT=off) cannot be the only one. The files' content is checked when the listener opens
 * (http/tls-material.ts), where the error can name the file.
 */
function tls (env: Env): TlsConfig | null {
  const certFile = str(env, 'THREATFEED_TLS_CERT', null)
  const keyFile = str(env, 'THREATFEED_TLS_KEY', null)
  const others = ['THREATFEED_TLS_PORT', 'THREATFEED_TLS_KEY_PASSPHRASE', 'THREATFEED_TLS_CLIENT_CA', 'THREATFEED_TLS_RELOAD'].filter((n) => env[n] !== undefined && env[n] !== '')
  if (certFile === null) {
    if (keyFile !== null) fail('THREATFEED_TLS_CERT', 'is required when THREATFEED_TLS_KEY is set')
    if (others.length > 0) fail('THREATFEED_TLS_CERT', `is required when ${others[0]} is set`)
    return null
  }
  if (keyFile === null) fail('THREATFEED_TLS_KEY', 'is required when THREATFEED_TLS_CERT is set')
  const clientCa = str(env, 'THREATFEED_TLS_CLIENT_CA', null)
  return Object.freeze({
    port: int(env, 'THREATFEED_TLS_PORT', 8443, 0, 65535),
    certFile: resolve(certFile),
    keyFile: resolve(keyFile),
    passphrase: str(env, 'THREATFEED_TLS_KEY_PASSPHRASE', null),
    clientCaFile: clientCa === null ? null : resolve(clientCa),
    reloadMs: durationOrOff(env, 'THREATFEED_TLS_RELOAD', 1000, 100, 86_400_000),
  })
}

/**
 * Reads the configuration from an environment (process.env by default).
 *
 * @example
 *   const config = loadConfig({ PORT: '9090', THREATFEED_DATA_DIR: '/var/lib/threatfeed' })
 */
export function loadConfig (env: Env = process.env): Config {
  const store = oneOf(env, 'THREATFEED_STORE', ['embedded', 'mongodb'] as const, 'embedded')
  const mongodbUri = str(env, 'THREATFEED_MONGODB_URI', null)
  if (store === 'mongodb' && mongodbUri === null) fail('THREATFEED_MONGODB_URI', 'is required when THREATFEED_STORE=mongodb')
  if (mongodbUri !== null && !/^mongodb(\+srv)?:\/\//.test(mongodbUri)) fail('THREATFEED_MONGODB_URI', 'must start with mongodb:// or mongodb+srv://')
  const host = str(env, 'HOST', '0.0.0.0')!
  const port = env.PORT === 'off' ? null : int(env, 'PORT', 8080, 0, 65535)
  const tlsConfig = tls(env)
  if (port === null && tlsConfig === null) fail('PORT', 'may be off only when THREATFEED_TLS_CERT and THREATFEED_TLS_KEY are set (no listener otherwise)')
  return Object.freeze({
    host,
    port,
    tls: tlsConfig,
    dataDir: resolve(str(env, 'THREATFEED_DATA_DIR', './data')!),
    store,
    mongodbUri,
    mongodbDb: str(env, 'THREATFEED_MONGODB_DB', 'threatfeed')!,
    feedRebuildMs: int(env, 'THREATFEED_FEED_REBUILD_MS', 30_000, 0, 3_600_000),
    geoCountryDb: str(env, 'THREATFEED_GEO_COUNTRY_DB', null),
    geoAsnDb: str(env, 'THREATFEED_GEO_ASN_DB', null),
    maxBodyBytes: int(env, 'THREATFEED_MAX_BODY_BYTES', 8 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    rateLimitPerSecond: int(env, 'THREATFEED_RATE_LIMIT_RPS', 1000, 1, 1_000_000),
    rateLimitBurst: int(env, 'THREATFEED_RATE_LIMIT_BURST', 2000, 1, 10_000_000),
    pollMs: int(env, 'THREATFEED_POLL_MS', 250, 10, 60_000),
    workers: int(env, 'THREATFEED_WORKERS', 2, 1, 64),
    logLevel: oneOf(env, 'THREATFEED_LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info'),
    shutdownMs: int(env, 'THREATFEED_SHUTDOWN_MS', 8_000, 0, 60_000),
    sweepIntervalMs: durationOrOff(env, 'THREATFEED_SWEEP_INTERVAL', 60_000, 1000, 86_400_000),
    streamRetentionMs: duration(env, 'THREATFEED_STREAM_RETENTION', 7 * 86_400_000, 0, 3650 * 86_400_000),
    tombstoneMax: int(env, 'THREATFEED_TOMBSTONE_MAX', TOMBSTONE_MAX, 0, 1_000_000_000),
    consumerTracking: oneOf(env, 'THREATFEED_CONSUMER_TRACKING', ['on', 'off'] as const, 'on') === 'on',
    consumerStaleMs: duration(env, 'THREATFEED_CONSUMER_STALE', DEFAULT_CONSUMER_STALE_MS, 1000, 30 * 86_400_000),
    consumersPerKey: int(env, 'THREATFEED_CONSUMERS_PER_KEY', DEFAULT_CONSUMERS_PER_KEY, 1, MAX_TRACKED_CONSUMERS),
    trustedProxies: trustedProxies(env, 'THREATFEED_TRUSTED_PROXIES'),
    httpThreads: int(env, 'THREATFEED_HTTP_THREADS', Math.min(64, availableParallelism()), 1, 64),
    backgroundNice: int(env, 'THREATFEED_BACKGROUND_NICE', 10, 0, 19),
    batchJournalMax: int(env, 'THREATFEED_BATCH_JOURNAL_MAX', BATCH_JOURNAL_MAX, 0, 1_000_000),
    batchJournalRetentionMs: duration(env, 'THREATFEED_BATCH_JOURNAL_RETENTION', BATCH_JOURNAL_RETENTION_MS, 60_000, 3650 * 86_400_000),
    deltaHistory: int(env, 'THREATFEED_DELTA_HISTORY', 32, 0, 1024),
    deltaMaxAgeMs: duration(env, 'THREATFEED_DELTA_MAX_AGE', 86_400_000, 1000, 30 * 86_400_000),
    bouncerMaxDurationMs: duration(env, 'THREATFEED_BOUNCER_MAX_DURATION', 86_400_000, 60_000, 30 * 86_400_000),
  })
}
