/**
 * A poll's time is its turn's wall clock (src/http/turn-clock.ts), except near its snapshot's
 * lapse (src/http/feed-routes.ts TURN_CLOCK_SLACK_MS): there the poll reads its own clock and the
 * snapshot is looked up again with it, so a reading up to a turn old never decides whether a
 * lapsing snapshot is still served (DECISIONS §5).
 */
import t from 'tap'
import type { FeedId, FeedSnapshot } from '../../src/feed/snapshot-types.js'
import { bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer } from '../helpers/feed-server.js'

/** Records the time every lookup was made with. */
class RecordingSource extends StaticFeedSource {
  readonly lookups: number[] = []
  override getSnapshot (workspaceId: string, feedId: FeedId, now: number): FeedSnapshot | null {
    this.lookups.push(now)
    return super.getSnapshot(workspaceId, feedId, now)
  }
}

const source = new RecordingSource()
// One front-end thread even in the threaded run (feed-threads.test.ts): the recorder sees the main
// thread's lookups only, and a front-end thread answers with the same feedRoutes over its replica.
const server = await startFeedServer(() => source, { threads: 1 })
t.teardown(() => server.stop())
const ws = server.workspace.id

const cases: Array<{ name: string, lapseInMs: number, lookups: number }> = [
  { name: 'a snapshot with no lapse', lapseInMs: Infinity, lookups: 1 },
  { name: 'a lapse a minute away', lapseInMs: 60_000, lookups: 1 },
  { name: 'a lapse two seconds away', lapseInMs: 2_000, lookups: 1 },
  { name: 'a lapse half a second away', lapseInMs: 500, lookups: 2 },
  { name: 'a lapse 100 ms away', lapseInMs: 100, lookups: 2 },
]
for (const c of cases) {
  t.test(c.name, async (t) => {
    const expiresAt = Date.now() + c.lapseInMs
    source.set(buildTestSnapshot({ workspaceId: ws, feedId: '*', networks: ['192.0.2.1/32'], lastModified: Date.UTC(2026, 0, 15), expiresAt }))
    source.lookups.length = 0
    const before = Date.now()
    const r = await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(server.key) })
    t.equal(r.status, 200, 'served: not lapsed when the poll was answered')
    t.equal(source.lookups.length, c.lookups, `${c.lookups} lookup(s)`)
    const last = source.lookups[source.lookups.length - 1]!
    t.ok(last >= before && last <= Date.now(), 'the deciding lookup\'s time is a reading of this poll\'s')
    if (c.lookups === 2) t.ok(last >= source.lookups[0]!, 'the poll\'s own clock, not earlier than its turn\'s')
  })
}
