/**
 * The feed tasks run on the calling thread: the same functions the workers run
 * (workers/feed-worker.ts is a thin shell around them), for one-shot builds such as
 * `threatfeed feed get` where starting threads would cost more than the work.
 */
import type { GeoIndex } from '../geo/geo-index.js'
import { computeNetworks } from './render/compute-networks.js'
import { renderStream } from './render/render-stream.js'
import type { FeedTasks } from './build-snapshot.js'

/**
 * @example
 *   const tasks = inProcessTasks(await loadGeoIndex({ countryDb, asnDb }))
 *   const { snapshot } = await buildSnapshot(def, rules, { tasks, lastModified, now: Date.now() })
 */
export function inProcessTasks (geo: GeoIndex): FeedTasks {
  return {
    compute: async (task) => computeNetworks({ ...task, geo: { version: 0 } }, geo),
    render: async (task) => renderStream(task),
  }
}
