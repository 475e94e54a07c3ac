/**
 * A directed experiment for the soak's sweep: what does removing one lapsed rule cost, old build
 * against new, in one run? (bench/soak/sweep-pass.ts measures one build; this one alternates.)
 *
 * The store, built once into TEMPLATE by the first build named: SEED random-target unkeyed rules
 * that lapsed an hour ago, swept so that SEED tombstones are kept (the soak's steady state: the
 * tombstone cap reached, so every removal also evicts one), then RULES live random-target rules
 * (80 % IPv4, 20 % IPv6) that arrived at RATE a second in 1000-rule batches as the consumer
 * applies them, each expiring 60–600 s after its arrival, the last arrival now: about a quarter
 * have lapsed. Each run copies the template, opens it with the build's store (a newer format is
 * migrated at the open, outside the timing) with a tombstone cap of SEED, and sweeps in passes of
 * PASS (RuleStore#sweepLapsed, as the consumer's passes of its own do) until a pass removes
 * nothing or MAX were removed. It prints CPU (all threads: LMDB commits on its own) and wall time
 * per removed rule, and data.mdb's growth. Builds alternate ROUNDS times, each run in a child
 * process of its own, so the module state of one never reaches the other.
 *
 * Pages written per removal: run one child under strace (see bench/NOTES.md, "Sweep: the cost of a
 * removal"):
 *
 *   BUILDS=/work/main,. ROUNDS=3 TEMPLATE=/tmp/tf-sweep-cost npx tsx bench/soak/sweep-cost.ts
 *   SWEEP_COST_CHILD=. TEMPLATE=/tmp/tf-sweep-cost strace -f -y -e trace=openat,pwrite64,writev node --import=tsx bench/soak/sweep-cost.ts
 */
import { spawnSync } from 'node:child_process'
import { closeSync, cpSync, existsSync, mkdtempSync, openSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { randomTarget } from './targets.js'

const RULES = Number(process.env.RULES ?? 1_000_000)
const SEED = Number(process.env.SEED ?? 200_000)
const RATE = Number(process.env.RATE ?? 3000)
const PASS = Number(process.env.PASS ?? 2000)
const MAX = Number(process.env.MAX ?? 100_000)
const ROUNDS = Number(process.env.ROUNDS ?? 3)
const TEMPLATE = process.env.TEMPLATE ?? join(tmpdir(), 'tf-sweep-cost')
const BUILDS = (process.env.BUILDS ?? '.').split(',').map((b) => resolve(b))
const CHILD = process.env.SWEEP_COST_CHILD

interface Store {
  workspaces: { create (w: { name: string, subscription: 'active' }): Promise<{ id: string }> }
  rules: { sweepLapsed (now: number, limit: number): Promise<{ removed: number, tombstonesDropped: number, more: boolean }> }
  applyRuleBatch (batch: { ops: unknown[], checkpoint?: { consumer: string, seq: number } }): Promise<unknown>
  close (): Promise<void>
}
type Open = (dir: string, options?: { tombstoneMax?: number }) => Promise<Store>

async function storeOf (build: string): Promise<Open> {
  const mod = await import(pathToFileURL(join(build, 'src/store/embedded/embedded-store.ts')).href) as { openEmbeddedStore: Open }
  return mod.openEmbeddedStore
}

let seq = 1
async function load (store: Store, workspaceId: string, count: number, expiry: (i: number) => number): Promise<void> {
  for (let done = 0; done < count; done += 1000) {
    const ops: unknown[] = []
    for (let i = done; i < Math.min(count, done + 1000); i++) {
      ops.push({
        op: 'upsertAccessRule',
        input: { workspaceId, kind: 'access_rule', ruleRef: null, labels: {}, reason: null, expiresAt: expiry(i), seq: seq++, target: randomTarget(), action: 'block', name: null, confidence: null, severity: null },
      })
    }
    await store.applyRuleBatch({ ops, checkpoint: { consumer: 'rules', seq: seq - 1 } })
  }
}

async function build (open: Open): Promise<void> {
  const store = await open(TEMPLATE, { tombstoneMax: SEED })
  const ws = await store.workspaces.create({ name: 'soak', subscription: 'active' })
  const now = Date.now()
  await load(store, ws.id, SEED, () => now - 3_600_000 - Math.random() * 60_000)
  for (;;) {
    const pass = await store.rules.sweepLapsed(now, 5000)
    if (pass.removed === 0) break
  }
  const span = RULES / RATE * 1000
  await load(store, ws.id, RULES, (i) => Math.round(now - span + i / RATE * 1000 + 60_000 + Math.random() * 540_000))
  await store.close()
}

async function child (buildDir: string): Promise<void> {
  const open = await storeOf(buildDir)
  const dir = mkdtempSync(join(tmpdir(), 'tf-sweep-'))
  cpSync(TEMPLATE, dir, { recursive: true })
  try {
    const store = await open(dir, { tombstoneMax: SEED })
    const size0 = statSync(join(dir, 'data.mdb')).size
    // A mark for strace (-e trace=openat,...): the writes after it are the sweep's, not the open's.
    closeSync(openSync(join(dir, 'sweep-start'), 'w'))
    const now = Date.now()
    let removed = 0
    let dropped = 0
    let passes = 0
    let longest = 0
    const cpu0 = process.cpuUsage()
    const w0 = performance.now()
    while (removed < MAX) {
      const p0 = performance.now()
      const pass = await store.rules.sweepLapsed(now, PASS)
      longest = Math.max(longest, performance.now() - p0)
      if (pass.removed === 0) break
      removed += pass.removed
      dropped += pass.tombstonesDropped
      passes++
      await new Promise((resolve) => { setImmediate(resolve) })
    }
    const cpu = process.cpuUsage(cpu0)
    const wall = performance.now() - w0
    const grown = statSync(join(dir, 'data.mdb')).size - size0
    await store.close()
    console.log(JSON.stringify({ removed, dropped, passes, cpuUs: (cpu.user + cpu.system) / removed, wallUs: wall * 1000 / removed, longestMs: longest, grownBytes: grown / removed }))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (CHILD !== undefined) {
  await child(resolve(CHILD))
} else {
  if (!existsSync(join(TEMPLATE, 'data.mdb'))) {
    console.log(`building ${SEED} tombstones and ${RULES} rules into ${TEMPLATE} with ${BUILDS[0]}`)
    await build(await storeOf(BUILDS[0]!))
  }
  const runs = new Map<string, Array<Record<string, number>>>()
  for (let round = 0; round < ROUNDS; round++) {
    for (const b of BUILDS) {
      const out = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!], { env: { ...process.env, SWEEP_COST_CHILD: b }, encoding: 'utf8' })
      const line = out.stdout.trim().split('\n').pop() ?? ''
      if (out.status !== 0 || !line.startsWith('{')) throw new Error(`${b}: ${out.stderr}`)
      const r = JSON.parse(line) as Record<string, number>
      runs.set(b, [...(runs.get(b) ?? []), r])
      console.log(`round ${round + 1} ${b}: removed ${r.removed} (evicted ${r.dropped}) in ${r.passes} passes, cpu ${r.cpuUs!.toFixed(1)} µs/rule, wall ${r.wallUs!.toFixed(1)} µs/rule, longest pass ${r.longestMs!.toFixed(0)} ms, data.mdb +${r.grownBytes!.toFixed(0)} B/rule`)
    }
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  for (const [b, rs] of runs) console.log(`median ${b}: cpu ${median(rs.map((r) => r.cpuUs!)).toFixed(1)} µs/rule, wall ${median(rs.map((r) => r.wallUs!)).toFixed(1)} µs/rule`)
}
