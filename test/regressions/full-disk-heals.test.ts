/**
 * One failed apply stopped the consumer until a restart (issue 16): with the data directory on a
 * full 64 MiB tmpfs, every retry of the apply read its packed batch from the end, acknowledged
 * entries stayed unapplied, the backlog grew until every batch got 429, and /readyz said 200.
 *
 * Here the server runs on such a tmpfs, nearly filled by a file of the test's own: signals are
 * posted until the disk is full. Then: batches answer 500 within the deadline, feeds keep
 * answering, /readyz and /metrics show the consumer failing. The filler is deleted: the consumer
 * retries the failed apply from its start until it succeeds, the backlog drains, 429s stop,
 * /readyz is 200 again, and every acknowledged entry — and none answered 500 — is in the feed.
 *
 * Needs root (mount); skipped with a note otherwise.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmdirSync, statfsSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startRealServer, type RealServer } from '../helpers/real-server.js'

const DEADLINE_MS = 2000
const SLACK_MS = 500
/** Free space left beside the filler: room for a few dozen batches on the stream. */
const LEFT_BYTES = 6 * 2 ** 20
const BATCH = 1000

function mountTmpfs (): string | null {
  const dir = mkdtempSync(join(tmpdir(), 'tf-tmpfs-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', dir], { stdio: 'pipe' })
    return dir
  } catch {
    rmdirSync(dir)
    return null
  }
}

/** Distinct addresses, none adjacent (the feed would coalesce them): batch b, entry i → 10.b.x.2y. */
function addresses (b: number): string[] {
  return Array.from({ length: BATCH }, (_, i) => `10.${b}.${i >> 7}.${(i & 127) * 2}`)
}

async function until (what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms
  while (!await check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const mount = mountTmpfs()
if (mount === null) {
  t.comment('mount -t tmpfs is not permitted here (needs root): the full-disk test did not run')
  t.pass('skipped: no tmpfs')
} else {
  t.teardown(() => {
    try { execFileSync('umount', [mount]) } catch { execFileSync('umount', ['-l', mount]) }
    rmdirSync(mount)
  })

  t.test('a full disk answers 500 in time, keeps feeds up, and heals by itself once space returns', async (t) => {
    const dataDir = join(mount, 'data')
    mkdirSync(dataDir)
    let s: RealServer | null = await startRealServer(dataDir, { THREATFEED_FEED_REBUILD_MS: '200' })
    t.teardown(() => s?.server.stop())
    const srv = s

    const filler = join(mount, 'filler')
    const st = statfsSync(mount)
    writeFileSync(filler, Buffer.alloc(Math.max(0, st.bavail * st.bsize - LEFT_BYTES)))

    const acked = new Set<string>()
    const refused = new Set<string>()
    const statuses: number[] = []
    // Until the disk is full: appends fail (500) or applies fail and the backlog sheds load (429).
    for (let b = 0; b < 200 && statuses.filter((x) => x === 500).length < 5; b++) {
      const ips = addresses(b)
      const a = await srv.postBlocks(ips)
      statuses.push(a.status)
      if (a.status === 200) for (const ip of ips) acked.add(ip)
      else if (a.status === 500) {
        for (const ip of ips) refused.add(ip)
        t.ok(a.ms <= DEADLINE_MS + SLACK_MS, `batch ${b}: 500 in ${a.ms} ms`)
      } else t.equal(a.status, 429, `batch ${b}: 200, 429 or 500`)
    }
    t.comment(`statuses while filling: ${statuses.join(' ')}`)
    t.ok(statuses.includes(500), 'the full disk answers 500')
    t.ok(acked.size > 0, 'batches were acknowledged before the disk filled')

    t.equal((await srv.feed()).status, 200, 'feeds answer from memory while the disk is full')
    t.ok(await srv.metric('threatfeed_stream_apply_errors_total') > 0, 'the failing applies are counted')
    t.ok(await srv.metric('threatfeed_stream_apply_consecutive_failures') > 0, 'and are still failing')
    t.ok(await srv.metric('threatfeed_stream_backlog_records') > 0, 'acknowledged records wait')
    t.ok(await srv.metric('threatfeed_stream_last_apply_error_timestamp_seconds') > Date.now() / 1000 - 60, 'the last error is recent')
    await until('/readyz to say the consumer is wedged', async () => (await srv.readyz()).status === 503, 15_000)
    const wedged = await srv.readyz()
    t.match(wedged.body.checks.consumer, /^stream consumer failing for \d+ s \(\d+ attempts\): rule store unavailable: .*; backlog \d+ records, oldest unapplied \d+ s$/, '/readyz names the failure')
    t.ok(await srv.metric('threatfeed_stream_oldest_unapplied_seconds') >= 10, 'the oldest unapplied record has waited')
    t.equal((await srv.feed()).status, 200, 'feeds still answer')

    unlinkSync(filler)
    await until('the backlog to drain', async () => await srv.metric('threatfeed_stream_backlog_records') === 0, 20_000)
    await until('/readyz to be 200 again', async () => (await srv.readyz()).status === 200, 5000)
    t.equal(await srv.metric('threatfeed_stream_apply_consecutive_failures'), 0, 'the consumer applies again')
    t.equal(await srv.metric('threatfeed_stream_oldest_unapplied_seconds'), 0)
    const after = addresses(250)
    t.equal((await srv.postBlocks(after)).status, 200, 'signals are accepted again (no 429)')
    for (const ip of after) acked.add(ip)

    /** The feed's addresses (each a /32: none are adjacent). */
    const servedNow = async (): Promise<Set<string>> => new Set((await srv.feed()).body.split('\n').map((l) => l.replace(/\/32$/, '')))
    await until('the feed to serve every acknowledged entry', async () => {
      const served = await servedNow()
      return [...acked].every((ip) => served.has(ip))
    }, 10_000)
    const served = await servedNow()
    t.equal([...refused].filter((ip) => served.has(ip)).length, 0, 'no entry of a batch answered 500 is served')
    await srv.server.stop()
    s = null
  })
}
