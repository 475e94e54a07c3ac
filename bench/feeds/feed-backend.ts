/**
 * What both benchmarked front ends (uWS in serve-threatfeed.ts, node:http in serve-node.ts) stand
 * on: the LMDB store the orchestrator filled, the Authenticator, and the real FeedService building
 * the workspace feed's snapshot with the real builder. So both serve the same bytes, with the same
 * tags, and both pay for real authentication.
 */
import { loadConfig, type Config } from '../../src/config.js'
import { createLogger, type Logger } from '../../src/log.js'
import { openStore } from '../../src/store/open.js'
import type { Store } from '../../src/store/types.js'
import { Authenticator } from '../../src/http/auth.js'
import { FeedService } from '../../src/feed/feed-service.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { buildGeoIndex } from '../../src/geo/load.js'

export interface FeedBackend {
  readonly config: Config
  readonly log: Logger
  readonly store: Store
  readonly auth: Authenticator
  readonly feeds: FeedService
  stop (): Promise<void>
}

/**
 * Opens THREATFEED_DATA_DIR and builds the feed of `workspaceId` before resolving. The rules are
 * IP targets only, so an empty geo index is enough; the O(networks) work runs in-process, on the
 * same pinned core as the server, once, before any measurement.
 */
export async function openFeedBackend (workspaceId: string): Promise<FeedBackend> {
  const config = loadConfig({ ...process.env, HOST: '127.0.0.1', THREATFEED_LOG_LEVEL: 'warn' })
  const log = createLogger(config.logLevel, process.stderr)
  const store = await openStore({ kind: 'embedded', dataDir: config.dataDir })
  const auth = new Authenticator(store, { pollMs: config.pollMs })
  await auth.start()
  const geo = buildGeoIndex({})
  const feeds = new FeedService({
    store,
    pool: { ...inProcessTasks(geo), setGeo: () => {} },
    config: { feedRebuildMs: config.feedRebuildMs, pollMs: config.pollMs },
    log,
    geo,
    awaitMs: 120_000,
  })
  await feeds.start()
  await feeds.awaitSnapshot(workspaceId, '*')
  return {
    config,
    log,
    store,
    auth,
    feeds,
    async stop () {
      await feeds.stop()
      auth.stop()
      await store.close()
    },
  }
}
