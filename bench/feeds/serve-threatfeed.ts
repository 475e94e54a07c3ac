/**
 * The subject: the service's own uWS application with the feed routes (src/http/app.ts +
 * src/http/feed-routes.ts), over the real FeedService. Prints `READY <port>` once the feed is built.
 *
 * Usage: THREATFEED_DATA_DIR=… PORT=… node --import=tsx bench/feeds/serve-threatfeed.ts <workspaceId>
 */
import { Metrics } from '../../src/http/metrics.js'
import { RateLimiter, startHttpServer } from '../../src/http/app.js'
import { feedRoutes } from '../../src/http/feed-routes.js'
import { ListDirectory } from '../../src/http/list-resolve.js'
import { openFeedBackend } from './feed-backend.js'

const workspaceId = process.argv[2]
if (workspaceId === undefined) throw new Error('usage: serve-threatfeed.ts <workspaceId>')
const backend = await openFeedBackend(workspaceId)
const { config, store, auth, log, feeds } = backend
const lists = new ListDirectory(store, { pollMs: config.pollMs })
await lists.start()
const http = await startHttpServer({
  config,
  store,
  auth,
  metrics: new Metrics(),
  log,
  rateLimiter: new RateLimiter(config.rateLimitPerSecond, config.rateLimitBurst),
  readiness: async () => ({ ready: true, checks: {} }),
}, [feedRoutes({ feeds, lists })])
process.stdout.write(`READY ${http.port}\n`)

process.once('SIGTERM', () => {
  void (async () => {
    await http.close(1000)
    lists.stop()
    await backend.stop()
    process.exit(0)
  })()
})
