/**
 * The THREATFEED_* environment variables threatfeed knows, and a warning for any other: a
 * mistyped name (THREATFEED_DATADIR) is otherwise silently ignored, and the server or the CLI
 * runs on its default (issue 36). Imports nothing.
 */

/** Every THREATFEED_* variable read by the server or the CLI (README "Configuration"), and those the docs and tests use. */
export const KNOWN_VARIABLES: readonly string[] = Object.freeze([
  'THREATFEED_STORE', 'THREATFEED_DATA_DIR', 'THREATFEED_MONGODB_URI', 'THREATFEED_MONGODB_DB',
  'THREATFEED_TLS_CERT', 'THREATFEED_TLS_KEY', 'THREATFEED_TLS_PORT', 'THREATFEED_TLS_KEY_PASSPHRASE', 'THREATFEED_TLS_CLIENT_CA', 'THREATFEED_TLS_RELOAD',
  'THREATFEED_FEED_REBUILD_MS', 'THREATFEED_GEO_COUNTRY_DB', 'THREATFEED_GEO_ASN_DB', 'THREATFEED_MAX_BODY_BYTES',
  'THREATFEED_RATE_LIMIT_RPS', 'THREATFEED_RATE_LIMIT_BURST', 'THREATFEED_POLL_MS', 'THREATFEED_WORKERS', 'THREATFEED_LOG_LEVEL',
  'THREATFEED_SHUTDOWN_MS', 'THREATFEED_SWEEP_INTERVAL', 'THREATFEED_STREAM_RETENTION', 'THREATFEED_TOMBSTONE_MAX',
  'THREATFEED_CONSUMER_TRACKING', 'THREATFEED_CONSUMER_STALE', 'THREATFEED_TRUSTED_PROXIES', 'THREATFEED_HTTP_THREADS',
  'THREATFEED_BACKGROUND_NICE', 'THREATFEED_BATCH_JOURNAL_MAX', 'THREATFEED_BATCH_JOURNAL_RETENTION',
  'THREATFEED_CONSUMERS_PER_KEY', 'THREATFEED_DELTA_HISTORY', 'THREATFEED_DELTA_MAX_AGE',
  'THREATFEED_BOUNCER_MAX_DURATION',
  // `threatfeed import`'s key.
  'THREATFEED_API_KEY',
  // Not read: the README's curl examples keep a feed key in it, so an operator may well export it.
  'THREATFEED_KEY',
  // The MongoDB store tests' database, and what the replica-set suite's fault scenarios need.
  'THREATFEED_TEST_MONGODB_URI', 'THREATFEED_TEST_MONGODB_COMPOSE', 'THREATFEED_TEST_FAKETIME_LIB',
])

/** Edit distance (insertions, deletions, substitutions, and swaps of neighbours), for "did you mean". */
function distance (a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0]![j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1)
      d[i]![j] = v
    }
  }
  return d[a.length]![b.length]!
}

/** The known variable nearest to `name`, if near enough to be a typo of it (a third of the name after the prefix, at least 2). */
export function nearestVariable (name: string): string | null {
  let best: string | null = null
  let bestDistance = Infinity
  for (const known of KNOWN_VARIABLES) {
    const n = distance(name, known)
    if (n < bestDistance) { best = known; bestDistance = n }
  }
  const allowed = Math.max(2, Math.floor((name.length - 'THREATFEED_'.length) / 3))
  return bestDistance <= allowed ? best : null
}

/**
 * One line per THREATFEED_* variable of `env` that threatfeed does not know, naming the nearest
 * known one when it is close; sorted, so the output is the same from run to run.
 *
 * @example
 *   unknownVariableWarnings({ THREATFEED_DATADIR: '/srv' })
 *   // ['THREATFEED_DATADIR is not a threatfeed variable and is ignored; did you mean THREATFEED_DATA_DIR?']
 */
export function unknownVariableWarnings (env: Record<string, string | undefined>): string[] {
  const known = new Set(KNOWN_VARIABLES)
  return Object.keys(env).filter((k) => k.startsWith('THREATFEED_') && !known.has(k)).sort().map((name) => {
    const near = nearestVariable(name)
    return `${name} is not a threatfeed variable and is ignored${near === null ? '' : `; did you mean ${near}?`}`
  })
}
