import t from 'tap'
import { resolve } from 'node:path'
import { loadConfig } from '../src/config.js'

t.test('defaults follow DECISIONS §1', async (t) => {
  const c = loadConfig({})
  t.equal(c.host, '0.0.0.0')
  t.equal(c.port, 8080)
  t.equal(c.dataDir, resolve('./data'))
  t.equal(c.store, 'embedded')
  t.equal(c.feedRebuildMs, 30_000)
  t.equal(c.maxBodyBytes, 8 * 1024 * 1024)
  t.equal(c.geoCountryDb, null)
  t.ok(Object.isFrozen(c))
})

t.test('values are read', async (t) => {
  const c = loadConfig({ HOST: '127.0.0.1', PORT: '9090', THREATFEED_STORE: 'mongodb', THREATFEED_MONGODB_URI: 'mongodb://db:27017/?replicaSet=rs0', THREATFEED_FEED_REBUILD_MS: '500', THREATFEED_GEO_COUNTRY_DB: '/geo/c.mmdb' })
  t.equal(c.host, '127.0.0.1')
  t.equal(c.port, 9090)
  t.equal(c.store, 'mongodb')
  t.equal(c.mongodbUri, 'mongodb://db:27017/?replicaSet=rs0')
  t.equal(c.feedRebuildMs, 500)
  t.equal(c.geoCountryDb, '/geo/c.mmdb')
})

const bad: Array<{ description: string, env: Record<string, string>, message: RegExp }> = [
  { description: 'port not a number', env: { PORT: 'http' }, message: /^invalid configuration: PORT must be a whole number/ },
  { description: 'port out of range', env: { PORT: '70000' }, message: /^invalid configuration: PORT must be between 0 and 65535/ },
  { description: 'negative rebuild interval', env: { THREATFEED_FEED_REBUILD_MS: '-1' }, message: /THREATFEED_FEED_REBUILD_MS must be a whole number/ },
  { description: 'fractional body cap', env: { THREATFEED_MAX_BODY_BYTES: '1.5' }, message: /THREATFEED_MAX_BODY_BYTES must be a whole number/ },
  { description: 'tiny body cap', env: { THREATFEED_MAX_BODY_BYTES: '10' }, message: /THREATFEED_MAX_BODY_BYTES must be between 1024/ },
  { description: 'unknown store', env: { THREATFEED_STORE: 'postgres' }, message: /THREATFEED_STORE must be one of embedded, mongodb, got "postgres"/ },
  { description: 'mongodb without uri', env: { THREATFEED_STORE: 'mongodb' }, message: /THREATFEED_MONGODB_URI is required when THREATFEED_STORE=mongodb/ },
  { description: 'uri with wrong scheme', env: { THREATFEED_STORE: 'mongodb', THREATFEED_MONGODB_URI: 'http://x' }, message: /THREATFEED_MONGODB_URI must start with mongodb:\/\// },
  { description: 'control character in a path', env: { THREATFEED_DATA_DIR: 'a\nb' }, message: /THREATFEED_DATA_DIR must not contain control characters/ },
  { description: 'bad log level', env: { THREATFEED_LOG_LEVEL: 'loud' }, message: /THREATFEED_LOG_LEVEL must be one of/ },
  { description: 'zero workers', env: { THREATFEED_WORKERS: '0' }, message: /THREATFEED_WORKERS must be between 1 and 64/ },
  { description: 'retention without unit', env: { THREATFEED_STREAM_RETENTION: '90' }, message: /THREATFEED_STREAM_RETENTION must be a duration such as 90s, 15m, 12h or 7d, got "90"/ },
  { description: 'retention with unknown unit', env: { THREATFEED_STREAM_RETENTION: '2w' }, message: /THREATFEED_STREAM_RETENTION must be a duration/ },
  { description: 'negative retention', env: { THREATFEED_STREAM_RETENTION: '-1d' }, message: /THREATFEED_STREAM_RETENTION must be a duration/ },
  { description: 'fractional retention', env: { THREATFEED_STREAM_RETENTION: '1.5h' }, message: /THREATFEED_STREAM_RETENTION must be a duration/ },
  { description: 'retention with a space', env: { THREATFEED_STREAM_RETENTION: '7 d' }, message: /THREATFEED_STREAM_RETENTION must be a duration/ },
  { description: 'retention too long', env: { THREATFEED_STREAM_RETENTION: '3651d' }, message: /THREATFEED_STREAM_RETENTION must be between 0ms and 3650d, got 3651d/ },
  { description: 'sweep interval too short', env: { THREATFEED_SWEEP_INTERVAL: '500ms' }, message: /THREATFEED_SWEEP_INTERVAL must be between 1s and 1d, got 500ms/ },
  { description: 'sweep interval not a duration', env: { THREATFEED_SWEEP_INTERVAL: 'often' }, message: /THREATFEED_SWEEP_INTERVAL must be a duration such as 90s, 15m, 12h or 7d, or off, got "often"/ },
  { description: 'sweep interval OFF in capitals', env: { THREATFEED_SWEEP_INTERVAL: 'OFF' }, message: /THREATFEED_SWEEP_INTERVAL must be a duration/ },
  { description: 'tombstone cap negative', env: { THREATFEED_TOMBSTONE_MAX: '-1' }, message: /THREATFEED_TOMBSTONE_MAX must be a whole number/ },
  { description: 'tombstone cap with a unit', env: { THREATFEED_TOMBSTONE_MAX: '1M' }, message: /THREATFEED_TOMBSTONE_MAX must be a whole number, got "1M"/ },
  { description: 'tombstone cap too large', env: { THREATFEED_TOMBSTONE_MAX: '2000000000' }, message: /THREATFEED_TOMBSTONE_MAX must be between 0 and 1000000000/ },
  { description: 'background nice past the lowest priority', env: { THREATFEED_BACKGROUND_NICE: '20' }, message: /THREATFEED_BACKGROUND_NICE must be between 0 and 19, got 20/ },
  { description: 'background nice negative (a raise)', env: { THREATFEED_BACKGROUND_NICE: '-5' }, message: /THREATFEED_BACKGROUND_NICE must be a whole number, got "-5"/ },
  { description: 'batch journal cap negative', env: { THREATFEED_BATCH_JOURNAL_MAX: '-1' }, message: /THREATFEED_BATCH_JOURNAL_MAX must be a whole number, got "-1"/ },
  { description: 'batch journal cap in exponent form', env: { THREATFEED_BATCH_JOURNAL_MAX: '1e4' }, message: /THREATFEED_BATCH_JOURNAL_MAX must be a whole number, got "1e4"/ },
  { description: 'batch journal cap too large', env: { THREATFEED_BATCH_JOURNAL_MAX: '1000001' }, message: /THREATFEED_BATCH_JOURNAL_MAX must be between 0 and 1000000, got 1000001/ },
  { description: 'batch journal retention without unit', env: { THREATFEED_BATCH_JOURNAL_RETENTION: '7' }, message: /THREATFEED_BATCH_JOURNAL_RETENTION must be a duration such as 90s, 15m, 12h or 7d, got "7"/ },
  { description: 'batch journal retention shorter than a minute', env: { THREATFEED_BATCH_JOURNAL_RETENTION: '30s' }, message: /THREATFEED_BATCH_JOURNAL_RETENTION must be between 1m and 3650d, got 30s/ },
  { description: 'batch journal retention off', env: { THREATFEED_BATCH_JOURNAL_RETENTION: 'off' }, message: /THREATFEED_BATCH_JOURNAL_RETENTION must be a duration/ },
  { description: 'delta history negative', env: { THREATFEED_DELTA_HISTORY: '-1' }, message: /THREATFEED_DELTA_HISTORY must be a whole number, got "-1"/ },
  { description: 'delta history too long', env: { THREATFEED_DELTA_HISTORY: '1025' }, message: /THREATFEED_DELTA_HISTORY must be between 0 and 1024, got 1025/ },
  { description: 'delta max age without unit', env: { THREATFEED_DELTA_MAX_AGE: '24' }, message: /THREATFEED_DELTA_MAX_AGE must be a duration such as 90s, 15m, 12h or 7d, got "24"/ },
  { description: 'delta max age under a second', env: { THREATFEED_DELTA_MAX_AGE: '500ms' }, message: /THREATFEED_DELTA_MAX_AGE must be between 1s and 30d, got 500ms/ },
]

t.test('durations: the sweep interval and the stream retention', async (t) => {
  t.equal(loadConfig({}).sweepIntervalMs, 60_000, 'the sweep runs once a minute by default')
  t.equal(loadConfig({}).streamRetentionMs, 7 * 86_400_000, 'the stream keeps 7 days by default')
  const cases: Array<[string, number]> = [['90s', 90_000], ['15m', 900_000], ['12h', 43_200_000], ['7d', 604_800_000], ['0s', 0], ['250ms', 250]]
  for (const [text, ms] of cases) t.equal(loadConfig({ THREATFEED_STREAM_RETENTION: text }).streamRetentionMs, ms, text)
  t.equal(loadConfig({ THREATFEED_SWEEP_INTERVAL: '5s' }).sweepIntervalMs, 5000)
  t.equal(loadConfig({ THREATFEED_SWEEP_INTERVAL: 'off' }).sweepIntervalMs, null, 'off: this process neither sweeps nor trims')
})

t.test('the tombstone cap', async (t) => {
  t.equal(loadConfig({}).tombstoneMax, 1_000_000, 'a million by default')
  t.equal(loadConfig({ THREATFEED_TOMBSTONE_MAX: '0' }).tombstoneMax, 0, 'none kept')
  t.equal(loadConfig({ THREATFEED_TOMBSTONE_MAX: '250000' }).tombstoneMax, 250_000)
})

t.test('the background threads\' nice steps', async (t) => {
  t.equal(loadConfig({}).backgroundNice, 10, 'ten steps below the process by default')
  t.equal(loadConfig({ THREATFEED_BACKGROUND_NICE: '0' }).backgroundNice, 0, 'off')
  t.equal(loadConfig({ THREATFEED_BACKGROUND_NICE: '19' }).backgroundNice, 19)
})

t.test('the batch journal\'s bounds', async (t) => {
  t.equal(loadConfig({}).batchJournalMax, 10_000, '10,000 reports per workspace by default')
  t.equal(loadConfig({}).batchJournalRetentionMs, 7 * 86_400_000, 'kept 7 days by default')
  t.equal(loadConfig({ THREATFEED_BATCH_JOURNAL_MAX: '0' }).batchJournalMax, 0, 'none recorded')
  t.equal(loadConfig({ THREATFEED_BATCH_JOURNAL_MAX: '1000000' }).batchJournalMax, 1_000_000)
  t.equal(loadConfig({ THREATFEED_BATCH_JOURNAL_RETENTION: '1m' }).batchJournalRetentionMs, 60_000)
  t.equal(loadConfig({ THREATFEED_BATCH_JOURNAL_RETENTION: '365d' }).batchJournalRetentionMs, 365 * 86_400_000)
  t.equal(loadConfig({}).deltaHistory, 32, 'delta history default')
  t.equal(loadConfig({}).deltaMaxAgeMs, 86_400_000, 'delta max age default')
  t.equal(loadConfig({ THREATFEED_DELTA_HISTORY: '0', THREATFEED_DELTA_MAX_AGE: '2h' }).deltaMaxAgeMs, 7_200_000)
})

t.test('a bad value names the variable', async (t) => {
  for (const c of bad) {
    t.throws(() => loadConfig(c.env), { code: 'TF_ERR_CONFIG', message: c.message }, c.description)
  }
})
