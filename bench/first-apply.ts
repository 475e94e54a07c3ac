/**
 * bench/first-apply: how long does the consumer's first apply after a start hold the store's
 * write lock? A workspace of FIRST_APPLY_RULES unkeyed access rules (default 2,000,000, stored in
 * arrival order) is written once; then a store is opened as the consumer's thread opens it
 * (synchronous commits, the arrival identity warmed in the background) and given 100 new targets
 * every 100 ms (bench/bigws's 1,000 changes a second), while a second process — what every other
 * writer is: the HTTP thread's feed-version records, the CLI, the sweep — commits a small write
 * every 20 ms and times each. Reported: the first apply's time from its call to its commit, the
 * longest apply, and the second process's longest and p99 wait for a write (the write lock held
 * by the first apply shows up there, whatever the reason).
 *
 * FIRST_APPLY_DIR=<dir> keeps the fixture there (written once, reused by later runs: each run
 * stores targets of its own). FIRST_APPLY_S: how long the applies go on (default 20).
 *
 *   npm run bench first-apply
 */
import { fork } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { openEmbeddedStore } from '../src/store/embedded/embedded-store.js'
import { LmdbEnv } from '../src/store/embedded/lmdb-env.js'
import { openStore } from '../src/store/open.js'
import type { RuleOp } from '../src/store/batch-types.js'
import type { AccessRuleInput } from '../src/store/types.js'
import { percentile, report } from './lib/report.js'

const RULES = Number(process.env.FIRST_APPLY_RULES ?? 2_000_000)
const SECONDS = Number(process.env.FIRST_APPLY_S ?? 20)
const PROBE_MS = 20

function ipOf (n: number): string {
  return `${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`
}

function upsert (ws: string, n: number): RuleOp {
  const input: AccessRuleInput = {
    workspaceId: ws, kind: 'access_rule', ruleRef: null, target: { type: 'ip', value: `${ipOf(n)}/32` }, action: 'block',
    name: null, confidence: null, severity: null, labels: {}, reason: null, expiresAt: null, seq: 0,
  }
  return { op: 'upsertAccessRule', input }
}

/** The second process: a small write every PROBE_MS until told to stop; answers each write's time. */
async function probe (dir: string): Promise<void> {
  const env = new LmdbEnv(dir)
  const waits: number[] = []
  let stop = false
  process.on('message', () => { stop = true })
  process.send!({ type: 'ready' })
  for (let i = 0; !stop; i++) {
    const t = performance.now()
    await env.write((dbs) => { dbs.meta.put('bench-probe', i) })
    waits.push(performance.now() - t)
    await new Promise((resolve) => { setTimeout(resolve, PROBE_MS) })
  }
  await env.close()
  process.send!({ type: 'waits', waits }, () => { process.exit(0) })
}

async function fixture (dir: string): Promise<string> {
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = (await store.workspaces.create({ name: 'big', subscription: 'active' })).id
  const started = performance.now()
  for (let i = 0; i < RULES; i += 10_000) {
    await store.applyRuleBatch({ ops: Array.from({ length: Math.min(10_000, RULES - i) }, (_, k) => upsert(ws, 0x0a000000 + 2 * (i + k))) })
  }
  await store.close()
  console.log(`fixture: ${RULES} rules in ${((performance.now() - started) / 1000).toFixed(1)} s`)
  return ws
}

async function main (): Promise<void> {
  const kept = process.env.FIRST_APPLY_DIR
  const dir = kept ?? mkdtempSync(join(tmpdir(), 'first-apply-'))
  try {
    let ws: string
    if (kept !== undefined && existsSync(join(dir, 'data.mdb'))) {
      const env = new LmdbEnv(dir)
      ws = env.read((dbs) => Array.from(dbs.workspaces.getKeys({}), String)[0]!)
      await env.close()
    } else ws = await fixture(dir)
    const child = fork(fileURLToPath(import.meta.url), ['probe', dir], { execArgv: ['--import=tsx'] })
    const waits = new Promise<number[]>((resolve) => { child.on('message', (m: { type: string, waits?: number[] }) => { if (m.type === 'waits') resolve(m.waits!) }) })
    await new Promise<void>((resolve) => { child.once('message', () => { resolve() }) })
    // As src/store/embedded/consumer-thread-entry.ts opens it.
    const opened = performance.now()
    const store = await openEmbeddedStore(dir, { syncWrites: true })
    void store.rules.warmArrivals().catch(() => {})
    const applies: number[] = []
    let firstDoneMs = NaN
    // Targets of this run: above the fixture's, and apart from earlier runs'.
    let n = 0x64000000 + Math.floor(Math.random() * 0x1000000) * 2
    const until = performance.now() + SECONDS * 1000
    while (performance.now() < until) {
      const due = performance.now() + 100
      const t = performance.now()
      await store.applyRuleBatch({ ops: Array.from({ length: 100 }, () => upsert(ws, (n += 2))) })
      applies.push(performance.now() - t)
      if (Number.isNaN(firstDoneMs)) firstDoneMs = performance.now() - opened
      const wait = due - performance.now()
      if (wait > 0) await new Promise((resolve) => { setTimeout(resolve, wait) })
    }
    await store.close()
    child.send('stop')
    const probeWaits = (await waits).sort((a, b) => a - b)
    const figures = {
      firstApplyMs: applies[0]!,
      firstAppliedAfterOpenMs: firstDoneMs,
      longestApplyMs: Math.max(...applies),
      applies: applies.length,
      probeWrites: probeWaits.length,
      probeMaxMs: probeWaits[probeWaits.length - 1]!,
      probeP99Ms: percentile(probeWaits, 99),
    }
    console.log(JSON.stringify(figures))
    const c = `${RULES} unkeyed rules, 100 new targets every 100 ms`
    report('first-apply', 'The consumer\'s first apply after a start: how long the write lock is held', [
      { case: c, subject: 'first apply (call to commit)', value: figures.firstApplyMs, unit: 'ms' },
      { case: c, subject: 'longest apply', value: figures.longestApplyMs, unit: 'ms' },
      { case: c, subject: 'another process\'s longest write', value: figures.probeMaxMs, unit: 'ms' },
      { case: c, subject: 'another process\'s write p99', value: figures.probeP99Ms, unit: 'ms' },
    ], [], { rules: RULES, seconds: SECONDS, ...figures })
  } finally {
    if (kept === undefined) rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv[2] === 'probe') await probe(process.argv[3]!)
else await main()
