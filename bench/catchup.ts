/**
 * bench/catchup: the CPU a rebuild's catch-up read costs (RuleStore#accessRulesChangedSince, as
 * the rule cache calls it) in a workspace of CATCHUP_RULES access rules (default 1,000,000) after
 * 1,000 changes (900 new targets, 100 updates). With CATCHUP_BASE=<dir of another checkout> the
 * same read of that build runs on a directory it wrote, alternating with this build's, in one
 * process (CATCHUP_ROUNDS rounds each). Process CPU time (user + system) per read, and steal.
 *
 *   npm run bench catchup
 *   CATCHUP_RULES=2000000 CATCHUP_BASE=/tmp/tf-base npm run bench catchup
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { openStore } from '../src/store/open.js'
import type { AccessRuleInput } from '../src/store/types.js'
import { cpuTicks, median, report, stealPercent, type Row } from './lib/report.js'

const RULES = Number(process.env.CATCHUP_RULES ?? 1_000_000)
const ROUNDS = Number(process.env.CATCHUP_ROUNDS ?? 3)
const BASE = process.env.CATCHUP_BASE
const CHANGES = 1000
const WS = '8b0a2d4e-0f5c-4d6a-9e57-3c1b2a4d5e6f'

type Open = typeof openStore
type Store = Awaited<ReturnType<Open>>

interface Subject { name: string, store: Store, dir: string, since: number, seq: number, cpuMs: number[], wallMs: number[], changed: number[] }

function input (n: number, seq: number, action: 'block' | 'allow' = 'block'): AccessRuleInput {
  return {
    workspaceId: WS, kind: 'access_rule', ruleRef: null, target: { type: 'ip', value: `${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}/32` }, action,
    name: null, confidence: null, severity: null, labels: {}, reason: null, expiresAt: null, seq,
  }
}

async function subject (name: string, root: string): Promise<Subject> {
  const { openStore } = await import(join(root, 'src/store/open.ts')) as { openStore: Open }
  const dir = mkdtempSync(join(tmpdir(), `catchup-${name.replace(/\W/g, '')}-`))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  for (let i = 0; i < RULES; i += 10_000) {
    const ops = []
    for (let k = i; k < Math.min(RULES, i + 10_000); k++) ops.push({ op: 'upsertAccessRule' as const, input: input(0x0a000000 + 2 * k, k + 1) })
    await store.applyRuleBatch({ ops })
  }
  const s: Subject = { name, store, dir, since: -1, seq: RULES, cpuMs: [], wallMs: [], changed: [] }
  s.since = (await read(s)).seq
  return s
}

function read (s: Subject): ReturnType<Store['rules']['accessRulesChangedSince']> {
  // As the rule cache calls it: a store that lists removals gets `gone`.
  return s.store.rules.accessRulesChangedSince(WS, s.since, Date.now(), () => {}, () => {})
}

async function round (s: Subject, r: number): Promise<void> {
  const ops = []
  for (let k = 0; k < CHANGES; k++) {
    s.seq++
    ops.push({ op: 'upsertAccessRule' as const, input: k < CHANGES / 10 ? input(0x0a000000 + 2 * (r * 1000 + k), s.seq, 'allow') : input(0x64000000 + 2 * (r * CHANGES + k), s.seq) })
  }
  await s.store.applyRuleBatch({ ops })
  const cpu = process.cpuUsage()
  const t0 = performance.now()
  const answer = await read(s)
  const used = process.cpuUsage(cpu)
  s.wallMs.push(performance.now() - t0)
  s.cpuMs.push((used.user + used.system) / 1000)
  s.changed.push(answer.changed)
  s.since = answer.seq
}

const subjects: Subject[] = []
if (BASE !== undefined) subjects.push(await subject('before', BASE))
subjects.push(await subject('this build', join(import.meta.dirname, '..')))
const ticks0 = cpuTicks()
try {
  for (let r = 0; r < ROUNDS; r++) for (const s of subjects) await round(s, r)
} finally {
  for (const s of subjects) {
    await s.store.close()
    rmSync(s.dir, { recursive: true, force: true })
  }
}
const steal = stealPercent(ticks0, cpuTicks())
const rows: Row[] = []
const c = `${RULES} rules, ${CHANGES} changes since the last read`
for (const s of subjects) {
  rows.push({ case: c, subject: `${s.name}: catch-up CPU`, value: median(s.cpuMs), unit: 'ms' })
  rows.push({ case: c, subject: `${s.name}: catch-up wall`, value: median(s.wallMs), unit: 'ms' })
  rows.push({ case: c, subject: `${s.name}: rules handed over`, value: median(s.changed), unit: '' })
}
rows.push({ case: c, subject: 'CPU steal', value: steal ?? NaN, unit: '%' })
report('catchup', 'A rebuild\'s catch-up read in a big workspace', rows, [], { rules: RULES, rounds: ROUNDS, runs: subjects.map((s) => ({ name: s.name, cpuMs: s.cpuMs, wallMs: s.wallMs, changed: s.changed })) })
