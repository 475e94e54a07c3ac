/**
 * The first apply after a start on a big workspace (bench/NOTES.md, "Consumer: the first apply
 * after a start"): the arrival identity (arrival-index.ts) of a workspace of many unkeyed rules
 * is built outside the write lock, so another process's writes go on while the consumer builds
 * it; and a consumer killed while it builds loses nothing, and its replay after a restart stores
 * each target once.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { LmdbEnv } from '../../../src/store/embedded/lmdb-env.js'
import type { RuleOp } from '../../../src/store/batch-types.js'
import { openStore } from '../../../src/store/open.js'
import { target } from '../../fixtures/store/first-apply-plan.js'
import { Child } from '../child-process.js'
import { accessInput, ip } from '../contract-fixtures.js'

/** Rules of the big workspace: enough that building its identity takes hundreds of milliseconds. */
const RULES = 120_000
/** A child's lines may take long on the shared machine. */
const LINE_MS = 240_000

const dir = await mkdtemp(join(tmpdir(), 'threatfeed-first-apply-'))
// A 120,000-rule fixture and five child processes under tsx: past tap's 180 s on a slow machine.
t.setTimeout(600_000)
t.teardown(() => rm(dir, { recursive: true, force: true }))
const ws = await (async () => {
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const id = (await store.workspaces.create({ name: 'big', subscription: 'active' })).id
  for (let i = 0; i < RULES; i += 10_000) {
    const ops: RuleOp[] = Array.from({ length: 10_000 }, (_, k) => ({ op: 'upsertAccessRule', input: accessInput(id, { target: ip(target(i + k)) }) }))
    await store.applyRuleBatch({ ops })
  }
  await store.close()
  return id
})()

/** The child's arguments: batches of 100 targets from `first` (test/fixtures/store/first-apply.ts). */
function consumer (first: number, batches: number, action: 'block' | 'allow'): Child {
  return new Child('first-apply.ts', [dir, ws, String(first), String(batches), action])
}

t.test('another process writes while the consumer builds the identity of its first apply', async (t) => {
  // The other writer: a small write every 10 ms, each timed from its call to its commit.
  const env = new LmdbEnv(dir)
  const writes: Array<[number, number]> = []
  let probing = true
  const probe = (async () => {
    for (let i = 0; probing; i++) {
      const at = performance.now()
      await env.write((dbs) => { dbs.meta.put('test-probe', i) })
      writes.push([at, performance.now()])
      await new Promise((resolve) => { setTimeout(resolve, 10) })
    }
  })()
  const child = consumer(RULES, 5, 'block')
  let started = 0
  let firstDone = 0
  await child.waitForLine((line) => { if (line === 'start') started = performance.now(); return line === 'start' }, LINE_MS)
  const first = await child.waitForLine((line) => line.startsWith('applied 0 '), LINE_MS)
  firstDone = performance.now()
  await child.waitForLine((line) => line.startsWith('applied 4 '), LINE_MS)
  t.equal(await child.exited, 0, 'the consumer applied its batches and exited')
  probing = false
  await probe
  await env.close()
  const window = firstDone - started
  const during = writes.filter(([, end]) => end > started && end < firstDone)
  // Every write that overlapped the first apply, by how long it waited.
  const longest = Math.max(0, ...writes.filter(([at, end]) => end > started && at < firstDone).map(([at, end]) => end - at))
  t.comment(`first apply ${first.split(' ')[2]} ms in the child (${Math.round(window)} ms seen here); ${during.length} writes of another process committed meanwhile, the longest ${Math.round(longest)} ms`)
  t.ok(during.length >= 3, `another process committed writes during the first apply (${during.length})`)
  t.ok(longest < window / 2, `none of them waited for the whole build: longest ${Math.round(longest)} ms against ${Math.round(window)} ms`)
})

t.test('a consumer killed while it builds the identity loses nothing; its replay stores each target once', async (t) => {
  const from = RULES + 10_000
  const killed = consumer(from, 3, 'allow')
  await killed.waitForLine((line) => line === 'start', LINE_MS)
  await killed.kill('SIGKILL')
  t.notOk(killed.lines.some((line) => line.startsWith('applied')), 'killed before its first apply committed')
  // The restart replays the same batches, then a second start updates targets stored before.
  for (const [first, batches] of [[from, 3], [0, 2]] as const) {
    const again = consumer(first, batches, 'allow')
    await again.waitForLine((line) => line.startsWith(`applied ${batches - 1} `), LINE_MS)
    t.equal(await again.exited, 0)
  }
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  const rules = await store.rules.listAccessRules(ws, 0)
  const targets = new Set(rules.map((r) => r.target.value))
  t.equal(targets.size, rules.length, 'no target stored twice')
  t.equal(rules.length, RULES + 500 + 300, 'the fixture, the first test\'s 500 and the replayed 300')
  const allowed = new Set(rules.filter((r) => r.action === 'allow').map((r) => r.target.value))
  const expected = [...Array.from({ length: 300 }, (_, i) => target(from + i)), ...Array.from({ length: 200 }, (_, i) => target(i))]
  t.same(expected.filter((x) => !allowed.has(x)), [], 'the replayed targets and the updated old ones are allowed')
  t.equal(allowed.size, 500, 'and nothing else')
})
