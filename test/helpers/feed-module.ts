/**
 * The feed routes over a real FeedService (in-process tasks, no geo data), as a module for
 * startTestServer (test/helpers/server.ts): signals posted to that server reach its feeds through
 * the store and the stream consumer, as in production.
 *
 * @example
 *   const feeds = feedModule()
 *   const srv = await startTestServer({ env: { THREATFEED_FEED_REBUILD_MS: '0' }, modules: feeds.modules })
 *   t.teardown(async () => { await feeds.stop(); await srv.close() })
 */
import { FeedService } from '../../src/feed/feed-service.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { buildGeoIndex } from '../../src/geo/load.js'
import { feedRoutes } from '../../src/http/feed-routes.js'
import type { TestServerOptions } from './server.js'

export interface FeedModule {
  readonly modules: NonNullable<TestServerOptions['modules']>
  /** The service, once the server has built it. */
  service (): FeedService
  stop (): Promise<void>
}

/** `start: false` leaves `service().start()` to the test (to build first after some signals). */
export function feedModule (options: { start?: boolean } = {}): FeedModule {
  const geo = buildGeoIndex({})
  let feeds: FeedService | null = null
  return {
    modules: ({ store, config }) => {
      feeds = new FeedService({
        store,
        pool: { ...inProcessTasks(geo), setGeo: () => {} },
        config: { feedRebuildMs: config.feedRebuildMs, pollMs: config.pollMs },
        log: { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} },
        geo,
      })
      if (options.start !== false) void feeds.start()
      return [feedRoutes({ feeds })]
    },
    service: () => {
      if (feeds === null) throw new Error('the test server has not built its feed service yet')
      return feeds
    },
    stop: async () => { await feeds?.stop() },
  }
}
