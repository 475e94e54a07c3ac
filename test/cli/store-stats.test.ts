/**
 * `threatfeed store stats` against a running server (`threatfeed serve` as a process), and the
 * tombstone cap the server was started with honoured by the thread that sweeps: rules lapse,
 * the server's consumer thread sweeps them, and the tombstone tables hold at most
 * THREATFEED_TOMBSTONE_MAX entries. The thread once opened its own store without the setting, so
 * the cap was the default million whatever was configured.
 *
 * The rules are written by a second process on the directory (as `threatfeed rules` or another
 * node would), not posted: a posted block lapses 60 s after it is sent at the soonest.
 */
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { storeCommand } from '../../src/cli/store.js'
import type { StatsReport } from '../../src/store/maintenance.js'
import { GEO_FIXTURES } from '../feed/fixtures.js'
import { runCommand } from '../helpers/cli.js'
import { accessInput, ip } from '../store/contract-fixtures.js'

const CAP = 25
const LAPSING = 400

const dir = mkdtempSync(join(tmpdir(), 'tf-store-stats-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

/** `threatfeed serve` on `dataDir` with `env`, resolved once it listens; stopped at teardown. */
async function serve (dataDir: string, env: Record<string, string>): Promise<void> {
  const child: ChildProcess = spawn(process.execPath, ['--import=tsx', 'src/cli/run.ts', 'serve'], {
    env: {
      PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', THREATFEED_DATA_DIR: dataDir, THREATFEED_POLL_MS: '50',
      THREATFEED_GEO_COUNTRY_DB: `${GEO_FIXTURES}/GeoLite2-Country-Test.mmdb`, THREATFEED_GEO_ASN_DB: `${GEO_FIXTURES}/GeoLite2-ASN-Test.mmdb`, ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
  t.teardown(() => { child.kill('SIGTERM'); return exited })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no "listening" log line within 60 s')), 60_000)
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if ((JSON.parse(line) as { msg?: string }).msg === 'listening') { clearTimeout(timer); resolve() }
    })
  })
}

async function stats (dataDir: string): Promise<StatsReport> {
  const r = await runCommand(storeCommand, ['stats', '--json'], { env: { THREATFEED_DATA_DIR: dataDir } })
  if (r.code !== 0) throw new Error(`store stats: ${r.code} ${r.stderr}`)
  return JSON.parse(r.stdout) as StatsReport
}

const table = (report: StatsReport, name: string): { entries: number, bytes: number } => report.files[0]!.tables[name] ?? { entries: -1, bytes: -1 }

t.test('the server sweeps to the tombstone cap it was started with', async (t) => {
  const dataDir = join(dir, 'cap')
  const store = await openEmbeddedStore(dataDir)
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  await store.close()
  await serve(dataDir, { THREATFEED_TOMBSTONE_MAX: String(CAP), THREATFEED_SWEEP_INTERVAL: '1s' })

  const writer = await openEmbeddedStore(dataDir)
  const lapsesAt = Date.now() + 200
  await writer.applyRuleBatch({ ops: Array.from({ length: LAPSING }, (_, i) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws.id, { target: ip(`10.1.${i >> 8}.${i & 255}/32`), expiresAt: lapsesAt, seq: i + 1 }) })) })
  await writer.close()
  t.equal(table(await stats(dataDir), 'access-rules').entries, LAPSING, 'the rules are stored')

  // A sweep takes what lapsed before its 10-second grain began: within about 20 s.
  let report = await stats(dataDir)
  for (const deadline = Date.now() + 40_000; table(report, 'access-rules').entries > 0;) {
    if (Date.now() > deadline) throw new Error(`not swept: ${JSON.stringify(report.files[0]!.tables)}`)
    await new Promise((resolve) => setTimeout(resolve, 250))
    report = await stats(dataDir)
  }
  t.equal(table(report, 'access-rules').entries, 0, 'every lapsed rule swept')
  t.ok(table(report, 'tombstone-log').entries > 0, 'tombstones written')
  t.ok(table(report, 'tombstone-log').entries <= CAP, `the tombstone log holds at most the cap (${table(report, 'tombstone-log').entries})`)
  t.ok(table(report, 'tombstones-by-target').entries <= CAP, `so does the by-target table (${table(report, 'tombstones-by-target').entries})`)
})

t.test('store stats: each file, its tables, free pages and the snapshots readers hold', async (t) => {
  const dataDir = join(dir, 'plain')
  const store = await openEmbeddedStore(dataDir)
  await store.workspaces.create({ name: 'acme', subscription: 'active' })
  await store.close()
  const report = await stats(dataDir)
  t.same(report.files.map((f) => f.file), ['data.mdb', join('stream', 'data.mdb')])
  const main = report.files[0]!
  t.equal(main.tables.workspaces?.entries, 1, 'the workspace, counted')
  t.ok(main.fileBytes > 0 && main.freeBytes >= 0 && main.overheadBytes > 0, 'sizes')
  t.same(main.readers, [], 'nothing else has it open: no snapshot held')

  const text = await runCommand(storeCommand, ['stats'], { env: { THREATFEED_DATA_DIR: dataDir } })
  t.equal(text.code, 0)
  t.match(text.stdout, /^data\.mdb: [\d.]+ MiB, free [\d.]+ MiB, commit \d+, snapshots held: none$/m)
  t.match(text.stdout, /^ {2}workspaces +1 entries/m)

  const bad = await runCommand(storeCommand, ['stat'], { env: { THREATFEED_DATA_DIR: dataDir } })
  t.equal(bad.code, 2)
  t.match(bad.stderr, /unknown store command "stat"/)
})
