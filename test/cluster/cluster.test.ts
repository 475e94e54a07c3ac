/**
 * Several nodes, one answer (issue 18): three `threatfeed serve` processes on one data directory,
 * random changes made through all of them (some at once on every node), and after each round
 * settles — the rebuild interval and a second — every node answers every variant of every feed
 * (formats, families, actions, md5, gzip) with the same status, ETag, Last-Modified and bytes, a
 * tag from any node gets 304 from the others, and a poller hopping between nodes with the tag it
 * holds is never sent the body again. Then the applying node is SIGKILLed: another applies within
 * 5 s, and every acknowledged entry is in the feeds.
 *
 * Each variant is asked once, at the settling time: no second look. Any disagreement fails the
 * test, except in a late check: one during which a node finished a build (its
 * threatfeed_feed_builds_total moved), so the fleet was still building at the settling time — the
 * machine did not give the builds the CPU to finish in time — and at most LATE_DIFFER_MAX of the
 * variants differed between nodes (those asked within a poll of the first node's switch). A late
 * check is reported with that evidence and the load, and fails the test when the machine was not
 * overloaded or when more than a quarter of the checks were late.
 *
 * Overloaded, for a check: while its round ran (the writes, the settling time, the check), or
 * during the settling time alone (where the builds run: a burst of other work there is averaged
 * away over the round), other work than the cluster's kept at least LOADED_PER_CORE threads per
 * core running or ready to run (sampleForeignLoad), the hypervisor's steal counted as such work
 * (STEAL_AS_THREADS: this VM's steal swings from 0 to 89 % between minutes). The settling time, rebuild interval + 1 s, leaves one second for what
 * follows the change — the apply, a node's poll of the store, the build after the boundary — and
 * all of it is CPU work: in a loaded run (load 7 per core) a round's last swap came 1.2–1.8 s
 * after its last write was acknowledged, on an idle machine 0.2–0.3 s. The product cannot keep
 * that second on a machine whose other work alone fills every core; it must keep it on one that
 * gives the nodes the CPU. The one-minute load average, used before, could not tell the two apart:
 * it lags the round by a minute and counts the nodes' own builds.
 *
 * CLUSTER_SEED=<n> replays a run (the seed is printed).
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../../src/store/open.js'
import { get, post, sampleForeignLoad, seedCluster, startNode, stopNode, variants, type Answer, type ForeignLoad, type Node } from '../helpers/cluster-nodes.js'

// About 80 s on a quiet machine (expiries are floored at 60 s and must lapse mid-run); twice that
// under load, past the suite's 180 s per file.
t.setTimeout(420_000)

const REBUILD_MS = 1000
const SETTLE_MS = REBUILD_MS + 1000
const ROUNDS = 16
/** Other work with this many threads per core runnable overloads the machine: a late build there is slowness, shown. */
const LOADED_PER_CORE = 1
/**
 * CPU time the hypervisor kept from the VM (steal) counts as other work: a core stolen half the
 * time leaves the nodes what one other runnable thread beside each of theirs would.
 */
const STEAL_AS_THREADS = 2
/**
 * In a late check, the share of variants whose answers may differ between nodes: those asked in
 * the poll interval after the first node switched (a node learns of another's switch on its next
 * poll of the store, or at once from a tag it does not know).
 */
const LATE_DIFFER_MAX = 0.05
/** Expiries are floored at 60 s (SPEC §2.1): rules posted with one lapse mid-run. */
const EXPIRY_S = 60

const seed = Number(process.env.CLUSTER_SEED ?? Date.now() % 1_000_000)
let state = seed
/** mulberry32: a small seeded PRNG, so a failing run can be replayed. */
function random (): number {
  state = (state + 0x6d2b79f5) | 0
  let x = Math.imul(state ^ (state >>> 15), 1 | state)
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296
}
const pick = <T>(a: readonly T[]): T => a[Math.floor(random() * a.length)]!

interface Entry { action: 'block' | 'allow', expiresAt: number | null, edge: boolean }

/** Targets never adjacent (each in a /24 or /48 of its own), so no two coalesce. */
let serial = 0
function nextTarget (): string {
  serial++
  return random() < 0.7 ? `10.${(serial >> 8) & 255}.${serial & 255}.1` : `2001:db8:${serial.toString(16)}::1`
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

t.test('three nodes on one store answer alike after every change, and survive the applier\'s death', async (t) => {
  t.comment(`CLUSTER_SEED=${seed}`)
  const dir = mkdtempSync(join(tmpdir(), 'tf-cluster-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const fleet = await seedCluster(dir)
  const env = { THREATFEED_FEED_REBUILD_MS: String(REBUILD_MS), THREATFEED_POLL_MS: '100', THREATFEED_HTTP_THREADS: '1' }
  const nodes: Node[] = []
  for (let i = 0; i < 3; i++) nodes.push(await startNode(dir, env))
  t.teardown(async () => { await Promise.all(nodes.map((n) => stopNode(n, 'SIGKILL'))) })
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  const auth = { authorization: fleet.auth }
  const all = variants(['*', ...fleet.listIds])
  const model = new Map<string, Entry>()
  let changes = 0
  const disagreements: string[] = []
  /** Checks that found the fleet still building at the settling time. */
  const late: Array<{ label: string, load: number, average: number, builds: number[], found: string[] }> = []
  /** Samples the load of other work from now until the next check ends. */
  let sampler: ForeignLoad | null = null
  const loads: number[] = []
  const startRound = (): void => { sampler = sampleForeignLoad(() => [process.pid, ...nodes.map((n) => n.pid)]) }
  /** The round's writes are acknowledged: its builds have the settling time from now. */
  const markSettling = (): void => { (sampler as ForeignLoad | null)?.mark(SETTLE_MS) }
  let checks = 0

  const postSignals = async (node: Node, body: unknown[], api: 'v1' | 'v2' = 'v1'): Promise<void> => {
    const r = await post(node.port, `/${api}/signal`, auth, body)
    if (r.status !== 200) throw new Error(`signal answered ${r.status}: ${JSON.stringify(r.json)}`)
  }
  const block = async (node: Node, n: number, expiring: boolean): Promise<void> => {
    const targets = Array.from({ length: n }, nextTarget)
    await postSignals(node, targets.map((ip) => ({ type: 'access_rules', action: 'block', ip, ...(expiring ? { expiration: EXPIRY_S } : {}) })))
    const expiresAt = expiring ? Date.now() + EXPIRY_S * 1000 : null
    for (const ip of targets) model.set(ip, { action: 'block', expiresAt, edge: false })
  }
  const v2Edge = async (node: Node): Promise<void> => {
    const ip = nextTarget()
    const action = random() < 0.3 ? 'allow' as const : 'block' as const
    await postSignals(node, [{ kind: 'access_rule', op: 'upsert', rule_ref: `r-${ip}`, labels: { team: 'edge' }, rule: { target: { ip }, action } }], 'v2')
    model.set(ip, { action, expiresAt: null, edge: true })
  }
  const unblock = async (node: Node): Promise<void> => {
    const live = [...model.entries()].filter(([, e]) => e.action === 'block' && !e.edge && e.expiresAt === null)
    if (live.length === 0) return block(node, 1, false)
    const [ip] = pick(live)
    await postSignals(node, [{ type: 'access_rules', action: 'unblock', ip }])
    model.delete(ip)
  }
  const editList = async (): Promise<void> => {
    await store.lists.update(pick(fleet.listIds), { description: `edited ${changes}` })
  }
  /** Waits until no rule of the model lapses within `margin` of the next check. */
  const quiet = async (): Promise<void> => {
    for (;;) {
      const now = Date.now()
      const near = [...model.values()].map((e) => e.expiresAt).filter((at): at is number => at !== null && at > now - 1500 && at < now + 6000)
      if (near.length === 0) return
      await sleep(Math.max(...near) + 1500 - now)
    }
  }

  /** Builds each node swapped in (or failed) so far, from its /metrics. */
  const builds = async (n: Node): Promise<number> => {
    const text = (await get(n.port, '/metrics')).body.toString('utf8')
    let sum = 0
    for (const m of text.matchAll(/^threatfeed_feed_builds_total\{[^}]*outcome="(?:built|failed)"[^}]*\} (\d+)/gm)) sum += Number(m[1])
    return sum
  }
  /**
   * Every variant on every live node, once: the same answer (any difference fails the test), and
   * each tag a 304 on the others. A tag answered 200 fails it too, unless a node finished a build
   * during the check (see the header): the fleet moved on together between the two asks, and the
   * check is late, shown.
   */
  const check = async (label: string, live: Node[]): Promise<void> => {
    checks++
    const average = loadavg()[0]! / availableParallelism()
    const before = await Promise.all(live.map(builds))
    const differ: string[] = []
    const found: string[] = []
    await compare(label, live, differ, found)
    const moved = (await Promise.all(live.map(builds))).map((b, k) => b - before[k]!)
    // Without /proc, the load average (which counts the nodes too) stands in.
    const sampled = (sampler as ForeignLoad | null)?.stop()
    const load = sampled === undefined ? average : Math.max(sampled.perCore + STEAL_AS_THREADS * sampled.steal, (sampled.windowPerCore + STEAL_AS_THREADS * sampled.windowSteal) || 0)
    sampler = null
    loads.push(load)
    if (differ.length + found.length === 0) return
    // Late: the first node's switch fell inside the check; the others follow within a poll.
    const variantsDiffering = new Set(differ.map((d) => d.slice(0, d.indexOf('}:') + 1))).size
    if (moved.some((b) => b > 0) && variantsDiffering <= LATE_DIFFER_MAX * all.length) late.push({ label, load, average, builds: moved, found: [...differ, ...found] })
    else disagreements.push(...differ, ...found)
  }
  /** `differ`: answers that differ between nodes; `refused`: tags of another node answered 200. */
  const compare = async (label: string, live: Node[], differ: string[], refused: string[]): Promise<void> => {
    const which = all
    for (let i = 0; i < which.length; i += 8) {
      await Promise.all(which.slice(i, i + 8).map(async (v) => {
        const answers: Answer[] = await Promise.all(live.map((n) => get(n.port, v.path, { ...auth, ...v.headers })))
        const first = answers[0]!
        answers.forEach((a, k) => {
          if (a.status !== first.status || a.etag !== first.etag || a.lastModified !== first.lastModified || !a.body.equals(first.body)) {
            differ.push(`${label} ${v.path} ${JSON.stringify(v.headers)}: node 0 ${first.status} ${first.etag} ${first.lastModified} ${first.digest} / node ${k} ${a.status} ${a.etag} ${a.lastModified} ${a.digest}`)
          }
        })
        if (first.status !== 200) return
        await Promise.all(live.map(async (n, k) => {
          const tag = answers[(k + 1) % live.length]!.etag!
          const r = await get(n.port, v.path, { ...auth, ...v.headers, 'if-none-match': tag })
          if (r.status !== 304) refused.push(`${label} ${v.path} ${JSON.stringify(v.headers)}: a tag of another node answered ${r.status} by node ${k}`)
        }))
      }))
    }
    // A poller hopping between nodes, holding the tag it was last given: never the body again.
    const path = '/v1/threat/feeds?format=dialect_a&family=both&action=block'
    let tag = (await get(live[0]!.port, path, auth)).etag!
    for (let hop = 0; hop < 3 * live.length; hop++) {
      const r = await get(live[hop % live.length]!.port, path, { ...auth, 'if-none-match': tag })
      if (r.status !== 304) refused.push(`${label} ${path} {}: hop ${hop} to node ${hop % live.length} answered ${r.status} to the tag of the node before`)
      tag = r.etag ?? tag
    }
  }

  // First requests build every feed on every node.
  await Promise.all(nodes.map((n) => Promise.all(['*', ...fleet.listIds].map((f) => get(n.port, `/v1/threat/feeds${f === '*' ? '' : `/${f}`}`, auth)))))
  startRound()
  await block(nodes[0]!, 5, false)
  markSettling()
  await sleep(SETTLE_MS)
  await check('start', nodes)

  for (let round = 0; round < ROUNDS; round++) {
    const kinds: Array<() => Promise<void>> = []
    const n = 2 + Math.floor(random() * 3)
    for (let i = 0; i < n; i++) {
      const node = pick(nodes)
      kinds.push(pick([
        () => block(node, 1 + Math.floor(random() * 20), false),
        () => block(node, 1 + Math.floor(random() * 5), round < 5),
        () => v2Edge(node),
        () => unblock(node),
        () => editList(),
      ]))
    }
    // Every other round, also a batch on every node at the same moment (the issue's measurement).
    if (round % 2 === 0) for (const node of nodes) kinds.push(() => block(node, 100, false))
    startRound()
    await Promise.all(kinds.map((k) => k()))
    changes += kinds.length
    markSettling()
    await sleep(SETTLE_MS)
    await quiet()
    await check(`round ${round}`, nodes)
  }
  t.ok(changes >= 50, `${changes} changes in ${ROUNDS} rounds`)
  for (const l of late) {
    t.comment(`late: ${l.label}, other work ${l.load.toFixed(1)} runnable per core (steal counted) during the round or its settling time (load average ${l.average.toFixed(1)} per core), builds finished during the check per node ${l.builds.join('/')}, ${l.found.length} answers disagreed; first: ${l.found[0]}`)
  }
  t.comment(`${late.length} of ${checks} checks found a node still building at the settling time`)
  const sorted = [...loads].sort((x, y) => x - y)
  t.comment(`other work during the rounds (or their settling time, if more), runnable threads per core with steal: min ${sorted[0]?.toFixed(2)}, median ${sorted[sorted.length >> 1]?.toFixed(2)}, max ${sorted[sorted.length - 1]?.toFixed(2)}`)
  t.same(late.filter((l) => l.load < LOADED_PER_CORE).map((l) => l.label), [], `no check is late on a machine that is not overloaded (other work under ${LOADED_PER_CORE} runnable thread per core)`)
  t.ok(late.length <= checks / 4, `at most a quarter of the checks late even under load (${late.length} of ${checks})`)
  for (const d of disagreements.slice(0, 20)) t.comment(d)
  if (disagreements.length > 0) for (const [k, n] of nodes.entries()) for (const w of n.warnings.slice(-20)) t.comment(`node ${k} (pid ${n.pid}): ${w}`)
  t.same(disagreements, [], `no disagreement between nodes (${disagreements.length} in all)`)

  // The applier dies: another takes over within 5 s, and nothing acknowledged is lost.
  const holder = await store.leases!.get('applier:rules')
  const pid = Number(holder?.owner.split('/')[1])
  const applier = nodes.find((n) => n.pid === pid)
  t.ok(applier !== undefined, `the lease names a node (${holder?.owner})`)
  if (applier === undefined) return
  const survivors = nodes.filter((n) => n !== applier)
  await stopNode(applier, 'SIGKILL')
  startRound()
  const killed = Date.now()
  await Promise.all(survivors.map((n) => block(n, 50, false)))
  markSettling()
  const head = await store.stream.head()
  let takenOver = -1
  while (Date.now() - killed < 10_000) {
    if (await store.stream.getCheckpoint('rules') >= head) { takenOver = Date.now() - killed; break }
    await sleep(50)
  }
  t.ok(takenOver >= 0 && takenOver < 5000, `another node applied within 5 s of the kill (${takenOver} ms)`)
  const after = await store.leases!.get('applier:rules')
  t.ok(survivors.some((n) => after?.owner.split('/')[1] === String(n.pid)), 'the lease moved to a survivor')
  await sleep(SETTLE_MS)
  await quiet()
  const before = disagreements.length
  const lateBefore = late.length
  await check('after the kill', survivors)
  t.same(disagreements.slice(before, before + 10), [], 'the survivors answer alike')
  t.same(late.slice(lateBefore).filter((l) => l.load < LOADED_PER_CORE).map((l) => l.found[0]), [], 'and none was still building on a machine that is not overloaded')

  const now = Date.now()
  const expected = (action: 'block' | 'allow'): string[] => [...model.entries()]
    .filter(([, e]) => e.action === action && (e.expiresAt === null || e.expiresAt > now + 2000))
    .map(([ip]) => ip.includes(':') ? `${ip}/128` : `${ip}/32`).sort()
  for (const action of ['block', 'allow'] as const) {
    const body = (await get(survivors[0]!.port, `/v1/threat/feeds?format=plain&family=both&action=${action}`, auth)).body.toString('utf8')
    const served = body.split('\n').filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.includes('/') ? l : l.includes(':') ? `${l}/128` : `${l}/32`).sort()
    t.same(served, expected(action), `every acknowledged ${action} entry is served, and nothing else`)
  }
})
