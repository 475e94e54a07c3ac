/**
 * The clock readings a turn of the event loop shares (src/http/turn-clock.ts): one reading per
 * clock for every caller of a turn, a fresh one in the next turn, and never a reading older than
 * the turn (a turn that waited for I/O reads anew).
 */
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { turnMonotonic, turnWallClock } from '../../src/http/turn-clock.js'

/** Busy-waits `ms` milliseconds, so the clocks move within the turn. */
function spin (ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) { /* spin */ }
}

t.test('every caller of one turn gets the same readings, taken by the first', async (t) => {
  await sleep(1)
  const before = Date.now()
  const monotonic = turnMonotonic()
  const wall = turnWallClock()
  spin(5)
  t.equal(turnMonotonic(), monotonic, 'monotonic: the turn\'s first reading')
  t.equal(turnWallClock(), wall, 'wall: the turn\'s first reading')
  t.ok(wall >= before && wall <= Date.now(), 'the wall reading is Date.now() of this turn')
  t.ok(Math.abs(monotonic - (performance.now() - 5)) < 50, 'the monotonic reading is performance.now() of this turn')
})

t.test('a microtask of the same turn shares the readings; the next turn reads anew', async (t) => {
  await sleep(1)
  const monotonic = turnMonotonic()
  const wall = turnWallClock()
  await Promise.resolve()
  t.equal(turnMonotonic(), monotonic, 'after a microtask: the same reading')
  spin(3)
  await new Promise((resolve) => setImmediate(resolve))
  await new Promise((resolve) => setImmediate(resolve))
  t.ok(turnMonotonic() >= monotonic + 3, 'a later turn: a later monotonic reading')
  t.ok(turnWallClock() >= wall + 2, 'a later turn: a later wall reading')
})

t.test('a reading is not kept across a wait for timers or I/O', async (t) => {
  await sleep(1)
  const monotonic = turnMonotonic()
  const wall = turnWallClock()
  await sleep(30)
  t.ok(turnMonotonic() - monotonic >= 25, 'monotonic: read after the wait')
  t.ok(turnWallClock() - wall >= 25, 'wall: read after the wait')
})
