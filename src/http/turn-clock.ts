/**
 * Clock readings shared by every request answered in one turn of the event loop.
 *
 * uWS answers all the requests one poll of the sockets returned in one turn, back to back (at
 * 256 busy connections, tens per turn). On the machines this runs on a clock read costs 0.1–0.2 µs
 * (Date.now and performance.now both go through the runtime to clock_gettime): the three a 304
 * made — arrival for the latency histogram, the wall time for the snapshot's expiry and the
 * consumer's last poll, the end for the histogram — were 4–5 % of its CPU (bench/NOTES.md, "Feeds:
 * the poll path"). Here the first request of a turn reads each clock and the rest of the turn
 * shares the readings; a setImmediate, one per turn that read a clock, clears them once the
 * turn's requests are done (a check-phase callback runs after the poll phase that dispatched them).
 *
 * What a reading means: the time the turn began answering, which for a request later in the turn
 * is earlier than its own callback by the work of the requests before it. As an arrival time that
 * is the truer one (its bytes had been read when the turn began); as a wall time it is at most
 * one turn old, far below a consumer's poll interval — and a poll near its snapshot's lapse reads
 * its own clock (feed-routes.ts TURN_CLOCK_SLACK_MS), so a lapsed rule is never served. The
 * end of a request is still read by its own clock (Metrics), so a latency is never shortened.
 */
import { performance } from 'node:perf_hooks'

/** The module's own handle: Node 20 reaches the global `performance` through a getter per use. */
const clock = performance.now.bind(performance)

/** -1: not read in this turn. */
let monotonic = -1
let wall = -1
let scheduled = false

function endTurn (): void {
  monotonic = -1
  wall = -1
  scheduled = false
}

function schedule (): void {
  if (scheduled) return
  scheduled = true
  setImmediate(endTurn)
}

/**
 * performance.now() as read by the first caller in this turn of the event loop.
 *
 * @example
 *   const start = turnMonotonic() // the same value for every request of this turn
 */
export function turnMonotonic (): number {
  if (monotonic < 0) {
    monotonic = clock()
    schedule()
  }
  return monotonic
}

/**
 * Date.now() as read by the first caller in this turn of the event loop.
 *
 * @example
 *   const snapshot = feeds.getSnapshot(workspaceId, feedId, turnWallClock())
 */
export function turnWallClock (): number {
  if (wall < 0) {
    wall = Date.now()
    schedule()
  }
  return wall
}
