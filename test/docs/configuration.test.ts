/**
 * docs/configuration.md names every variable threatfeed knows, and nothing else: the two tables'
 * first column against src/config-variables.ts (plus HOST and PORT), and each default the main
 * table gives against what loadConfig gives without the variable.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { KNOWN_VARIABLES } from '../../src/config-variables.js'
import { loadConfig } from '../../src/config.js'

const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8')
const rows = [...doc.matchAll(/^\| `([A-Z_]+)` \| ([^|]*) \|/gm)].map((m) => ({ name: m[1]!, def: m[2]!.trim() }))

t.test('the tables list exactly the known variables, once each', async (t) => {
  const names = rows.map((r) => r.name)
  t.same([...names].sort(), [...new Set(names)].sort(), 'no variable twice')
  t.same([...new Set(names)].sort(), ['HOST', 'PORT', ...KNOWN_VARIABLES].sort())
})

t.test('a numeric default in the table is the one loadConfig applies', async (t) => {
  const config = loadConfig({}) as unknown as Record<string, unknown>
  const field: Record<string, string> = {
    PORT: 'port',
    THREATFEED_FEED_REBUILD_MS: 'feedRebuildMs',
    THREATFEED_MAX_BODY_BYTES: 'maxBodyBytes',
    THREATFEED_RATE_LIMIT_RPS: 'rateLimitPerSecond',
    THREATFEED_RATE_LIMIT_BURST: 'rateLimitBurst',
    THREATFEED_POLL_MS: 'pollMs',
    THREATFEED_WORKERS: 'workers',
    THREATFEED_SHUTDOWN_MS: 'shutdownMs',
    THREATFEED_TOMBSTONE_MAX: 'tombstoneMax',
    THREATFEED_CONSUMERS_PER_KEY: 'consumersPerKey',
    THREATFEED_BACKGROUND_NICE: 'backgroundNice',
    THREATFEED_BATCH_JOURNAL_MAX: 'batchJournalMax',
    THREATFEED_DELTA_HISTORY: 'deltaHistory',
  }
  for (const [name, key] of Object.entries(field)) {
    const row = rows.find((r) => r.name === name)
    t.ok(row, `${name} has a row`)
    t.equal(row!.def, `\`${String(config[key])}\``, `${name}'s default`)
  }
  t.equal(config.host, '0.0.0.0')
  t.equal(rows.find((r) => r.name === 'HOST')!.def, '`0.0.0.0`')
  t.equal(config.mongodbDb, rows.find((r) => r.name === 'THREATFEED_MONGODB_DB')!.def.replaceAll('`', ''))
  t.equal(config.logLevel, rows.find((r) => r.name === 'THREATFEED_LOG_LEVEL')!.def.replaceAll('`', ''))
})
