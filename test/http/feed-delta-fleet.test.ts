/**
 * bench/fleet, small (npm run bench fleet has the 10,000 appliances): 100 appliances of
 * bench/bigws/poller.c --fleet poll a 4,096-entry feed through HTTP while it changes, a window
 * asking for full feeds and one for deltas. Each appliance must behave as one: keep the ETag it
 * took (one 200 per change each, every other poll a 304), send `since` so that the delta window's
 * bodies are deltas and the full window's are not, and receive fewer bytes for deltas.
 */
import { spawnSync } from 'node:child_process'
import t from 'tap'
import { runFleet } from '../../bench/fleet/run.js'

const cc = spawnSync('cc', ['--version']).status === 0

t.test('a fleet keeps its ETags and takes each change once, in full and in deltas', { skip: cc ? false : 'no C compiler for bench/bigws/poller.c' }, async (t) => {
  const r = await runFleet({ appliances: 100, periodS: 1, changeEveryS: 4, rounds: 1, entries: 4096, query: 'format=nftables&family=v4', serverCores: '0-1', log: (l) => { t.comment(l) } })
  t.comment(JSON.stringify({ ...r, windows: r.windows.map((w) => ({ ...w })) }))
  t.equal(r.errors, 0, 'no poll failed')
  t.equal(r.leadIn.polls, r.leadIn.notModified, 'before any change every poll is a 304 (the ETag given at the start is kept)')
  const [full, delta] = r.windows
  t.equal(full?.mode, 'full')
  t.equal(delta?.mode, 'delta')
  for (const w of [full!, delta!]) {
    t.equal(w.fullBodies + w.deltaBodies, 100, `${w.mode}: each appliance took the change once`)
    t.equal(w.notModified, w.polls - 100, `${w.mode}: every other poll was a 304`)
    t.equal(w.otherStatus, 0, `${w.mode}: no other status`)
  }
  t.equal(full!.deltaBodies, 0, 'full window: whole feeds (If-None-Match)')
  t.equal(delta!.fullBodies, 0, 'delta window: deltas only (since= the ETag taken in the full window)')
  t.ok(r.deltaGzipBytes < r.fullGzipBytes / 10, `a delta (${r.deltaGzipBytes} B) is under a tenth of the feed (${r.fullGzipBytes} B)`)
  t.ok(delta!.bytes200 < full!.bytes200 / 10, 'the delta window moved under a tenth of the full window\'s bodies')
})
