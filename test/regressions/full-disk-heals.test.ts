/**
 * One failed apply stopped the consumer until a restart (issue 16): with the data directory on a
 * full 64 MiB tmpfs, every retry of the apply read its packed batch from the end, acknowledged
 * entries stayed unapplied, the backlog grew until every batch got 429, and /readyz said 200.
 *
 * Two disks fill here, each in a test of its own, so that which write fails first is not left to
 * timing:
 * - the rules' disk (the main environment on a small tmpfs, the stream on a roomy one): signals are
 *   still acknowledged, applies fail, /readyz and /metrics show the consumer failing, feeds answer
 *   from memory; once the filler is deleted the consumer retries the failed pass from its start,
 *   the backlog drains, 429s stop, /readyz is 200 again and every acknowledged entry is served;
 * - the stream's disk (the stream on a small tmpfs, the main environment on a roomy one — with both
 *   on one small disk the applies could fail first and the backlog's 429s hide the stream's
 *   failure, as one CI run showed): batches are answered 500 within the deadline, and none of them
 *   is ever applied, before or after space returns.
 *
 * Needs root (mount); skipped with a note otherwise.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmdirSync, statfsSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { startRealServer, type RealServer } from '../helpers/real-server.js'

const DEADLINE_MS = 2000
/** Timed at the client, posting a 1,000-entry body on a machine that may be starved. */
const SLACK_MS = 2000
/** Free space left beside a filler: room for a few dozen batches. */
const LEFT_BYTES = 6 * 2 ** 20
const BATCH = 1000

/** A tmpfs of `size` mounted at `dir` (made when absent), unmounted at the end of `t`; false when mount is refused. */
function mountTmpfs (t: Test, dir: string, size: string): boolean {
  mkdirSync(dir, { recursive: true })
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' })
  } catch {
    rmdirSync(dir)
    return false
  }
  t.teardown(() => {
    try { execFileSync('umount', [dir]) } catch { execFileSync('umount', ['-l', dir]) }
    rmdirSync(dir)
  })
  return true
}

/** Fills the file system of `dir` but LEFT_BYTES with a file; returns its path. */
function fill (dir: string): string {
  const filler = join(dir, 'filler')
  const st = statfsSync(dir)
  writeFileSync(filler, Buffer.alloc(Math.max(0, st.bavail * st.bsize - LEFT_BYTES)))
  return filler
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

/** The feed's addresses (each a /32: none are adjacent). */
async function served (srv: RealServer): Promise<Set<string>> {
  return new Set((await srv.feed()).body.split('\n').map((l) => l.replace(/\/32$/, '')))
}

const probe = mkdtempSync(join(tmpdir(), 'tf-tmpfs-probe-'))
let canMount = false
try {
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe], { stdio: 'pipe' })
  execFileSync('umount', [probe])
  canMount = true
} catch {
  // not root, or no tmpfs: said below
}
rmdirSync(probe)

if (!canMount) {
  t.comment('mount -t tmpfs is not permitted here (needs root): the full-disk tests did not run')
  t.pass('skipped: no tmpfs')
} else {
  t.test('the rules\' disk full: applies fail and are shown, feeds answer, and it heals by itself once space returns', async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'tf-fulldisk-'))
    t.teardown(() => rmdirSync(root))
    const dataDir = join(root, 'data')
    t.ok(mountTmpfs(t, dataDir, '64m'), 'the main environment on 64 MiB')
    t.ok(mountTmpfs(t, join(dataDir, 'stream'), '512m'), 'the stream on 512 MiB')
    let s: RealServer | null = await startRealServer(dataDir, { THREATFEED_FEED_REBUILD_MS: '200' })
    t.teardown(() => s?.server.stop())
    const srv = s
    const filler = fill(dataDir)

    const acked = new Set<string>()
    const statuses: number[] = []
    // Until applies fail: the stream still has room, so batches are acknowledged (or shed, 429).
    for (let b = 0; b < 200 && !(await srv.metric('threatfeed_stream_apply_consecutive_failures') > 0 && statuses.length > 5); b++) {
      const ips = addresses(b)
      const a = await srv.postBlocks(ips)
      statuses.push(a.status)
      if (a.status === 200) for (const ip of ips) acked.add(ip)
      else t.equal(a.status, 429, `batch ${b}: 200 or 429, never 500: the stream has room`)
    }
    t.comment(`statuses while filling: ${statuses.join(' ')}`)
    t.ok(acked.size > 0, 'batches were acknowledged')
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
    await until('the backlog to drain', async () => await srv.metric('threatfeed_stream_backlog_records') === 0, 30_000)
    await until('/readyz to be 200 again', async () => (await srv.readyz()).status === 200, 5000)
    t.equal(await srv.metric('threatfeed_stream_apply_consecutive_failures'), 0, 'the consumer applies again')
    t.equal(await srv.metric('threatfeed_stream_oldest_unapplied_seconds'), 0)
    const after = addresses(250)
    t.equal((await srv.postBlocks(after)).status, 200, 'signals are accepted again (no 429)')
    for (const ip of after) acked.add(ip)
    await until('the feed to serve every acknowledged entry', async () => {
      const now = await served(srv)
      return [...acked].every((ip) => now.has(ip))
    }, 15_000)
    t.pass('every acknowledged entry is served')
    await srv.server.stop()
    s = null
  })

  t.test('the stream\'s disk full: 500 within the deadline, and a batch answered 500 is never applied', async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'tf-fulldisk-'))
    t.teardown(() => rmdirSync(root))
    const dataDir = join(root, 'data')
    t.ok(mountTmpfs(t, dataDir, '512m'), 'the main environment on 512 MiB')
    const streamDir = join(dataDir, 'stream')
    t.ok(mountTmpfs(t, streamDir, '64m'), 'the stream on 64 MiB')
    let s: RealServer | null = await startRealServer(dataDir, { THREATFEED_FEED_REBUILD_MS: '200' })
    t.teardown(() => s?.server.stop())
    const srv = s
    const filler = fill(streamDir)

    const acked = new Set<string>()
    const refused = new Set<string>()
    const statuses: number[] = []
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
    t.equal((await srv.feed()).status, 200, 'feeds answer from memory while the disk is full')
    // Readiness says what the node can do (issue 35: it said ready while every post answered 500).
    const full = await srv.readyz()
    t.equal(full.status, 503, '/readyz: not ready')
    t.match(full.body, { status: 'not ready', can: { signals: false, feeds: true } }, 'signals cannot be taken, feeds can')
    t.match(full.body.checks.signals, /^signal stream appends failing for \d+ s \(\d+ batches answered 500\): rule store unavailable: .+/, 'the check names the failing part')
    t.equal((await srv.readyz('signals')).status, 503, '/readyz?for=signals: 503, a balancer for signals stops sending')
    t.equal((await srv.readyz('feeds')).status, 200, '/readyz?for=feeds: 200, feeds are still served')

    unlinkSync(filler)
    await until('/readyz to be 200 again once space returns', async () => (await srv.readyz()).status === 200, 20_000)
    t.match((await srv.readyz()).body, { status: 'ready', can: { signals: true, feeds: true }, checks: { signals: true } })
    await until('the backlog to drain', async () => await srv.metric('threatfeed_stream_backlog_records') === 0, 30_000)
    const after = addresses(250)
    t.equal((await srv.postBlocks(after)).status, 200, 'signals are accepted again')
    for (const ip of after) acked.add(ip)
    await until('the feed to serve every acknowledged entry', async () => {
      const now = await served(srv)
      return [...acked].every((ip) => now.has(ip))
    }, 15_000)
    const now = await served(srv)
    t.equal([...refused].filter((ip) => now.has(ip)).length, 0, 'no entry of a batch answered 500 is served')
    await srv.server.stop()
    s = null
  })
}
