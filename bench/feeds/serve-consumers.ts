/**
 * serve-threatfeed.ts with feed consumer tracking wired as src/main.ts wires it (issue 20), on or
 * off by THREATFEED_CONSUMER_TRACKING: the two subjects of the "304 polls with consumer tracking"
 * case. Prints `READY <port>` once the feed is built.
 *
 * Usage: THREATFEED_DATA_DIR=… PORT=… THREATFEED_CONSUMER_TRACKING=on|off node --import=tsx bench/feeds/serve-consumers.ts <workspaceId>
 */
import { Metrics, registerFeedConsumerMetrics } from '../../src/http/metrics.js'
import { RateLimiter, startHttpServer } from '../../src/http/app.js'
import { feedRoutes } from '../../src/http/feed-routes.js'
import { ListDirectory } from '../../src/http/list-resolve.js'
import { ConsumerTracker } from '../../src/http/consumers.js'
import { ClientAddresses } from '../../src/http/consumer-address.js'
import { openFeedBackend } from './feed-backend.js'

const workspaceId = process.argv[2]
if (workspaceId === undefined) throw new Error('usage: serve-consumers.ts <workspaceId>')
const backend = await openFeedBackend(workspaceId)
const { config, store, auth, log, feeds } = backend
const lists = new ListDirectory(store, { pollMs: config.pollMs })
await lists.start()
const metrics = new Metrics()
const tracker = config.consumerTracking ? new ConsumerTracker({ store, log, staleMs: config.consumerStaleMs }) : null
if (tracker !== null) registerFeedConsumerMetrics(metrics, tracker)
tracker?.start()
const http = await startHttpServer({
  config,
  store,
  auth,
  metrics,
  log,
  rateLimiter: new RateLimiter(config.rateLimitPerSecond, config.rateLimitBurst),
  readiness: async () => ({ ready: true, checks: {} }),
}, [feedRoutes({ feeds, lists, consumers: tracker === null ? undefined : { tracker, addresses: new ClientAddresses(config.trustedProxies) } })])
process.stdout.write(`READY ${http.port}\n`)

process.once('SIGTERM', () => {
  void (async () => {
    await http.close(1000)
    await tracker?.stop()
    lists.stop()
    await backend.stop()
    process.exit(0)
  })()
})
