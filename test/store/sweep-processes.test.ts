/**
 * Two processes sweep and trim one LMDB directory at once while this one renews some of the
 * lapsed rules: no error, every lapsed rule removed by exactly one of them (the counts add up to
 * the tombstones), nothing live or renewed removed, and the stream trimmed once.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import t from 'tap'
import { openStore } from '../../src/store/open.js'
import { SWEEP_GRAIN_MS } from '../../src/store/types.js'
import { fixturePath } from './child-process.js'
import { accessInput, freshWorkspaceId, ip } from './contract-fixtures.js'

const LAPSED = 3000
const RENEWED = 300
const LIVE = 500

function sweeper (dir: string, now: number): { child: ChildProcess, lines: AsyncIterator<string>, stderr: () => string } {
  const child = spawn(process.execPath, ['--import=tsx', fixturePath('sweep.ts'), dir, String(now), '100'], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (c: string) => { stderr += c })
  return { child, lines: createInterface({ input: child.stdout! })[Symbol.asyncIterator](), stderr: () => stderr }
}

async function nextLine (s: ReturnType<typeof sweeper>): Promise<string> {
  const r = await s.lines.next()
  if (r.done === true) throw new Error(`the sweeper ended early: ${s.stderr()}`)
  return r.value
}

t.test('two processes sweeping at once remove each lapsed rule once and nothing live', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-sweep2-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const now = Date.now()
  const cut = Math.floor(now / SWEEP_GRAIN_MS) * SWEEP_GRAIN_MS
  const ws = freshWorkspaceId()
  const target = (i: number): ReturnType<typeof ip> => ip(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}/32`)
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  // Lapsed over the last ten minutes, in many transactions and buckets.
  for (let b = 0; b < LAPSED; b += 100) {
    await store.applyRuleBatch({ ops: Array.from({ length: 100 }, (_, j) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: target(b + j), expiresAt: cut - 1 - ((b + j) * 199) % 600_000 }) })) })
  }
  await store.applyRuleBatch({ ops: Array.from({ length: LIVE }, (_, i) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: target(100_000 + i), expiresAt: now + 3_600_000 }) })) })
  for (let a = 0; a < 20; a++) await store.stream.append(Array.from({ length: 10 }, (_, i) => ({ workspaceId: ws, payload: `{"n":${i}}`, acceptedAt: now - 60_000 })))
  await store.stream.setCheckpoint('rules', 150)

  const sweepers = [sweeper(dir, now), sweeper(dir, now)]
  t.teardown(() => { for (const s of sweepers) s.child.kill('SIGKILL') })
  for (const s of sweepers) t.equal(await nextLine(s), 'ready')
  for (const s of sweepers) s.child.stdin?.write('go\n')
  // Renewed while they sweep: each either was swept first (and is re-inserted) or is kept.
  for (let i = 0; i < RENEWED; i += 10) {
    await store.applyRuleBatch({ ops: Array.from({ length: 10 }, (_, j) => ({ op: 'upsertAccessRule' as const, input: accessInput(ws, { target: target(i + j), expiresAt: now + 3_600_000 }) })) })
  }
  const results = await Promise.all(sweepers.map(async (s) => JSON.parse(await nextLine(s)) as { removed: number, trimmed: number }))
  const codes = await Promise.all(sweepers.map((s) => new Promise((resolve) => { if (s.child.exitCode !== null) resolve(s.child.exitCode); else s.child.once('exit', resolve) })))
  t.same(codes, [0, 0], 'both exit cleanly')

  let tombstones = 0
  for (let i = 0; i < LAPSED; i++) tombstones += (await store.rules.lapsedTombstones(ws, target(i))).length
  const removed = results[0]!.removed + results[1]!.removed
  t.equal(removed, tombstones, `one tombstone per rule removed (${results[0]!.removed} + ${results[1]!.removed}): nobody counted a rule twice`)
  t.ok(removed >= LAPSED - RENEWED && removed <= LAPSED, `every lapsed rule not renewed first was removed (${removed})`)
  const left = await store.rules.listAccessRules(ws, now)
  t.equal(left.length, LIVE + RENEWED, 'the live and the renewed rules are all there')
  t.equal((await store.rules.list(ws, 'access_rule')).length, LIVE + RENEWED, 'and nothing lapsed is stored')
  t.equal(results[0]!.trimmed + results[1]!.trimmed, 140, 'the stream trimmed once, up to the checkpoint\'s append')
  t.equal((await store.stream.retained()).first, 141)
})
