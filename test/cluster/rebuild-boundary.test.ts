/**
 * A change shows within the rebuild interval plus a second (DECISIONS §5) even when the feed's
 * last build started off a boundary — here a first build on demand a quarter into an interval,
 * with the change right after it. Before the fix the next rebuild was the boundary a whole
 * interval after that build, two boundaries away: the change showed 1.75 intervals after it was
 * acknowledged, on a single node as on each node of a fleet (issue 18's cluster test missed its
 * settling time that way).
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { get, post, seedCluster, startNode, stopNode } from '../helpers/cluster-nodes.js'

t.setTimeout(120_000)

/** Long enough that "two boundaries away" (≥ 1.5 intervals here) is well past interval + 1 s. */
const REBUILD_MS = 4000
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

t.test('a change right after a build on demand mid-interval shows within the interval and a second', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-boundary-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const fleet = await seedCluster(dir)
  const auth = { authorization: fleet.auth }
  const node = await startNode(dir, { THREATFEED_FEED_REBUILD_MS: String(REBUILD_MS), THREATFEED_POLL_MS: '100', THREATFEED_HTTP_THREADS: '1' })
  t.teardown(() => stopNode(node, 'SIGKILL'))

  const cases = [
    { description: 'a first build a quarter into the interval', at: 0.25 },
    { description: 'a first build just past a boundary', at: 0.05 },
  ]
  for (const [i, c] of cases.entries()) {
    // Each case asks a feed no one asked before, so its first request builds it.
    const feedPath = `/v1/threat/feeds${i === 0 ? '' : `/${fleet.listIds[1]!}`}?format=plain&family=v4&action=block`
    const now = Date.now()
    await sleep((Math.floor(now / REBUILD_MS) + 1 + c.at) * REBUILD_MS - now)
    const first = await get(node.port, feedPath, auth)
    t.equal(first.status, 200, `${c.description}: built on demand`)
    // Far apart: neighbours would be coalesced into one network.
    const ip = i === 0 ? '192.0.2.10' : '198.51.100.20'
    const r = await post(node.port, '/v1/signal', auth, [{ type: 'access_rules', action: 'block', ip }])
    t.equal(r.status, 200, `${c.description}: the change is acknowledged`)
    const acknowledged = Date.now()
    let shownAfter = -1
    while (Date.now() - acknowledged < 3 * REBUILD_MS) {
      if ((await get(node.port, feedPath, auth)).body.toString('utf8').includes(`${ip}/32`)) { shownAfter = Date.now() - acknowledged; break }
      await sleep(50)
    }
    t.ok(shownAfter >= 0 && shownAfter <= REBUILD_MS + 1000, `${c.description}: the change shows within the interval and a second (${shownAfter} ms)`)
  }
})
