/**
 * A directed experiment for the soak's sweep: what does sweeping one lapsed rule cost on a store
 * the size of the soak's steady state, and where does it go?
 *
 * One embedded store, one workspace, RULES unkeyed access rules of random IPv4/IPv6 targets that
 * arrived at RATE a second (applied in 1000-rule batches, as the consumer applies them), each
 * expiring 60–600 s after its arrival, the last arrival now: about a quarter have lapsed. Then the
 * sweep runs in passes of PASS (as the Housekeeper calls RuleStore#sweepLapsed) until nothing is
 * left, with a tombstone cap of CAP, so that the passes past the cap evict as the soak's do. It
 * prints the CPU and wall time per swept rule and the bytes written (/proc/self/io) per swept
 * rule, before and past the cap. The store is built once into TEMPLATE (when set and missing) and
 * copied for each run, so variants compare on the same rules.
 *
 *   RULES=1200000 CAP=150000 PASS=2000 TEMPLATE=/tmp/tf-sweep-template node --cpu-prof --import=tsx bench/soak/sweep-pass.ts
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { open } from 'lmdb'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import type { RuleOp } from '../../src/store/batch-types.js'
import { randomTarget } from './targets.js'

const RULES = Number(process.env.RULES ?? 1_200_000)
const RATE = Number(process.env.RATE ?? 3000)
const CAP = Number(process.env.CAP ?? 150_000)
const PASS = Number(process.env.PASS ?? 2000)
const TEMPLATE = process.env.TEMPLATE
/** Stop after this many rules swept (the comparison needs no more). */
const MAX = Number(process.env.MAX ?? Infinity)

function writtenBytes (): number {
  const m = /write_bytes: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))
  return Number(m![1])
}

async function build (dir: string): Promise<void> {
  const store = await openEmbeddedStore(dir)
  const ws = await store.workspaces.create({ name: 'soak', subscription: 'active' })
  const now = Date.now()
  const span = RULES / RATE * 1000
  let seq = 1
  for (let done = 0; done < RULES; done += 1000) {
    const ops: RuleOp[] = []
    for (let i = done; i < Math.min(RULES, done + 1000); i++) {
      const arrival = now - span + i / RATE * 1000
      ops.push({
        op: 'upsertAccessRule',
        input: { workspaceId: ws.id, kind: 'access_rule', ruleRef: null, labels: {}, reason: null, expiresAt: Math.round(arrival + 60_000 + Math.random() * 540_000), seq: seq++, target: randomTarget(), action: 'block', name: null, confidence: null, severity: null },
      })
    }
    await store.applyRuleBatch({ ops, checkpoint: { consumer: 'rules', seq: seq - 1 } })
  }
  await store.close()
}

let dir: string
if (TEMPLATE !== undefined) {
  if (!existsSync(join(TEMPLATE, 'data.mdb'))) {
    console.log(`building ${RULES} rules into ${TEMPLATE}`)
    await build(TEMPLATE)
  }
  dir = mkdtempSync(join(tmpdir(), 'tf-sweep-'))
  cpSync(TEMPLATE, dir, { recursive: true })
} else {
  dir = mkdtempSync(join(tmpdir(), 'tf-sweep-'))
  await build(dir)
}

const store = await openEmbeddedStore(dir, { tombstoneMax: CAP })
const root = open({ path: dir, noSubdir: false, maxDbs: 24, readOnly: true })
interface Stat { treeBranchPageCount: number, treeLeafPageCount: number, overflowPages: number }
const pagesOf = (s: Stat): number => s.treeBranchPageCount + s.treeLeafPageCount + s.overflowPages
function lmdbPages (): string {
  root.resetReadTxn()
  const all = root.getStats() as Stat & { lastPageNumber: number, free: Stat }
  return `file ${all.lastPageNumber + 1} freelist ${pagesOf(all.free)}`
}
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))
interface Phase { swept: number, dropped: number, passes: number, cpuUs: number, wallMs: number, bytes: number, longest: number }
const phases: Phase[] = [{ swept: 0, dropped: 0, passes: 0, cpuUs: 0, wallMs: 0, bytes: 0, longest: 0 }, { swept: 0, dropped: 0, passes: 0, cpuUs: 0, wallMs: 0, bytes: 0, longest: 0 }]
const now = Date.now()
for (;;) {
  const cpu0 = process.cpuUsage()
  const w0 = performance.now()
  const b0 = writtenBytes()
  const pass = await store.rules.sweepLapsed(now, PASS)
  const cpu = process.cpuUsage(cpu0)
  const p = phases[pass.tombstonesDropped > 0 ? 1 : 0]!
  const wall = performance.now() - w0
  p.swept += pass.removed
  p.dropped += pass.tombstonesDropped
  p.passes++
  p.cpuUs += cpu.user + cpu.system
  p.wallMs += wall
  p.longest = Math.max(p.longest, wall)
  p.bytes += writtenBytes() - b0
  if (process.env.VERBOSE !== undefined && (p.passes <= 5 || p.passes % 50 === 0)) console.log(`pass: removed ${pass.removed} stale ${pass.staleCleaned} dropped ${pass.tombstonesDropped} ${wall.toFixed(0)} ms ${((writtenBytes() - b0) / 4096).toFixed(0)} pages ${lmdbPages()}`)
  if (!pass.more || phases[0]!.swept + phases[1]!.swept >= MAX) break
  await turn()
}
for (const [i, p] of phases.entries()) {
  if (p.swept === 0) continue
  console.log(`${i === 0 ? 'below the cap' : 'past the cap '}  swept ${p.swept}  dropped ${p.dropped}  passes ${p.passes}  cpu ${(p.cpuUs / p.swept).toFixed(1)} µs/rule  wall ${(p.wallMs * 1000 / p.swept).toFixed(1)} µs/rule  written ${(p.bytes / p.swept).toFixed(0)} B/rule  longest pass ${p.longest.toFixed(0)} ms`)
}
await store.close()
rmSync(dir, { recursive: true, force: true })
