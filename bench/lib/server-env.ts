/**
 * The settings every bench that starts threatfeed in-process shares: loopback on a free port, the
 * data directory given, warnings only, a rate limit no bench load reaches, and the test geo
 * databases (the default ASN database would be built into the data directory on first start).
 */
import { join } from 'node:path'
import { repoDir } from './report.js'

const GEO = join(repoDir, 'test', 'fixtures', 'geo', 'maxmind')

export function benchServerEnv (dataDir: string): Record<string, string> {
  return {
    HOST: '127.0.0.1',
    PORT: '0',
    THREATFEED_DATA_DIR: dataDir,
    THREATFEED_LOG_LEVEL: 'warn',
    THREATFEED_RATE_LIMIT_RPS: '100000',
    THREATFEED_RATE_LIMIT_BURST: '100000',
    THREATFEED_GEO_COUNTRY_DB: join(GEO, 'GeoLite2-Country-Test.mmdb'),
    THREATFEED_GEO_ASN_DB: join(GEO, 'GeoLite2-ASN-Test.mmdb'),
  }
}
