/**
 * Publish guards (README "Publish guards") through HTTP and the CLI, over the real FeedService:
 * - each guard trips on a crafted batch: the feed keeps the last good bytes and ETag (304s go on),
 *   answers `X-Feed-Held: <guard>`, and `list show` names the guard with the diff;
 * - the /metrics gauge of held feeds, the log line, `list accept` (refusing another digest);
 * - a held rule still lapses at its expiry, and a mass expiry alone never trips;
 * - a list that never published serves its first build only if it passes;
 * - `--guard-mode drop` leaves out exactly the special ranges of the IANA registry fixture.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { FeedService } from '../../src/feed/feed-service.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { registerFeedMetrics } from '../../src/feed/metrics.js'
import { buildGeoIndex } from '../../src/geo/load.js'
import { NetworkSet } from '../../src/net/network-set.js'
import { specialSpace } from '../../src/feed/render/special-ranges.js'
import type { AccessRuleInput, GuardSettings } from '../../src/store/types.js'
import { NO_COVERAGE, THREATFEED_BIN } from '../helpers/cli.js'
import { bearer, rawRequest, startFeedServer, syncLists, type RawResponse } from '../helpers/feed-server.js'

const geo = buildGeoIndex({})
const logs: Array<{ msg: string, obj: Record<string, unknown> }> = []
let service: FeedService | null = null
const server = await startFeedServer(async (store, ctx) => {
  const log = {
    info: () => {},
    debug: () => {},
    error: () => {},
    warn: (obj: Record<string, unknown>, msg: string) => { logs.push({ msg, obj }) },
  }
  service = new FeedService({ store, pool: { ...inProcessTasks(geo), setGeo: () => {} }, config: { feedRebuildMs: 0, pollMs: ctx.config.pollMs }, log: log as never, geo, metrics: registerFeedMetrics(ctx.metrics), awaitMs: 1500 })
  await service.start()
  return service
})
t.teardown(async () => {
  await service?.stop()
  await server.stop()
})
const ws = server.workspace.id
const auth = bearer(server.key)

function rule (value: string, feed: string, expiresAt: number | null = null): AccessRuleInput {
  return { kind: 'access_rule', workspaceId: ws, ruleRef: null, labels: { feed }, reason: null, expiresAt, seq: 0, target: { type: 'ip', value }, action: 'block', name: null, confidence: null, severity: null }
}
/** Hosts two apart: no two coalesce, so each is one network of the feed. */
const hosts = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}.${2 * i + 1}/32`)

async function guardedList (name: string, guards: GuardSettings, targets: Array<string | [string, number]>): Promise<string> {
  for (const x of targets) await server.store.rules.upsertAccessRule(typeof x === 'string' ? rule(x, name) : rule(x[0], name, x[1]))
  const list = await server.store.lists.create({ workspaceId: ws, name, description: '', defaults: { guards }, selector: { feed: name } })
  await syncLists(server)
  return list.id
}

const feed = (id: string, headers: Record<string, string> = {}): Promise<RawResponse> => rawRequest(server.base, `/v1/threat/feeds/${id}`, { headers: { ...auth, ...headers } })

async function until (what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 40))
  }
}

function cli (...args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [THREATFEED_BIN, ...args], { env: { PATH: process.env.PATH, ...NO_COVERAGE, THREATFEED_DATA_DIR: server.dir } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => { stdout += c.toString() })
    child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

async function heldGauge (): Promise<string | undefined> {
  return /^threatfeed_feed_held (\d+)$/m.exec(await server.metrics.registry.metrics())?.[1]
}

t.test('each guard trips on a crafted batch; the last good bytes, tag and 304s stay', async (t) => {
  const cases: Array<{ guard: string, settings: GuardSettings, base: string[], add: string[], remove: string[] }> = [
    // Every batch trips from its first write on: with no rebuild interval here, a build may run
    // between two writes of one batch.
    { guard: 'min_entries', settings: { minEntries: 5 }, base: hosts('11.18.1', 5), add: [], remove: ['11.18.1.1/32', '11.18.1.3/32'] },
    { guard: 'max_shrink_pct', settings: { maxShrinkPct: 5 }, base: hosts('11.19.1', 10), add: [], remove: hosts('11.19.1', 4) },
    { guard: 'max_grow_pct', settings: { maxGrowPct: 20 }, base: hosts('11.20.1', 4), add: hosts('11.20.2', 3), remove: [] },
    { guard: 'reject_special', settings: { rejectSpecial: true }, base: hosts('11.21.1', 3), add: ['192.168.7.0/24'], remove: [] },
    { guard: 'min_prefix_v4', settings: { minPrefixV4: 16 }, base: hosts('11.22.1', 3), add: ['11.32.0.0/12'], remove: [] },
    { guard: 'min_prefix_v6', settings: { minPrefixV6: 32 }, base: ['2606:4700::1/128'], add: ['2a00::/16'], remove: [] },
  ]
  for (const c of cases) {
    const id = await guardedList(`g-${c.guard}`, c.settings, c.base)
    const first = await feed(id)
    t.equal(first.status, 200, `${c.guard}: the base publishes`)
    t.equal(first.headers['x-feed-held'], undefined)
    for (const v of c.add) await server.store.rules.upsertAccessRule(rule(v, `g-${c.guard}`))
    for (const v of c.remove) await server.store.rules.deleteAccessByTarget(ws, { type: 'ip', value: v })
    await until(`${c.guard} to hold`, async () => (await feed(id)).headers['x-feed-held'] === c.guard)
    const held = await feed(id)
    t.equal(held.headers['x-feed-held'], c.guard)
    t.equal(held.body.toString(), first.body.toString(), `${c.guard}: the last good bytes`)
    t.equal(held.headers.etag, first.headers.etag, `${c.guard}: the last good tag`)
    const again = await feed(id, { 'if-none-match': first.headers.etag! })
    t.equal(again.status, 304, `${c.guard}: 304 for the holder of the old tag`)
    const gz = await feed(id, { 'accept-encoding': 'gzip', 'if-none-match': '"x"' })
    t.equal(gz.headers['x-feed-held'], c.guard, `${c.guard}: the gzip answer says so too`)
    type Shown = { publish: { held: { guards: Record<string, string>, diff: { block: { added: number, removed: number, added_sample: string[], removed_sample: string[] } } } } }
    let state: Shown | null = null
    await until(`${c.guard}: list show of the whole batch`, async () => {
      const shown = await cli('list', 'show', '--id', id, '--json')
      state = JSON.parse(shown.stdout) as Shown
      return state.publish.held?.diff.block.added === c.add.length && state.publish.held.diff.block.removed === c.remove.length
    }, 30_000)
    state = state!
    t.equal(state.publish.held.guards.block, c.guard, `${c.guard}: list show names it`)
    t.equal(state.publish.held.diff.block.removed, c.remove.length, `${c.guard}: networks removed`)
    t.same(state.publish.held.diff.block.removed_sample.sort(), [...c.remove].sort(), `${c.guard}: the removed sample`)
    t.equal(state.publish.held.diff.block.added, c.add.length, `${c.guard}: networks added`)
    t.ok(logs.some((l) => l.msg === 'feed build held by a publish guard' && l.obj.feed === id), `${c.guard}: a log line`)
  }
  t.equal(await heldGauge(), String(cases.length), 'the /metrics gauge counts the held feeds')
})

t.test('list accept publishes the held build, by its digest only', async (t) => {
  const id = await guardedList('accept-me', { maxShrinkPct: 5 }, hosts('11.30.1', 10))
  t.equal((await feed(id)).status, 200)
  for (const v of hosts('11.30.1', 5)) await server.store.rules.deleteAccessByTarget(ws, { type: 'ip', value: v })
  await until('the hold', async () => (await feed(id)).headers['x-feed-held'] === 'max_shrink_pct')
  const before = await heldGauge()
  let state: { publish: { held: { digest: string, diff: { block: { removed: number } } } } } | null = null
  await until('the whole batch held', async () => {
    state = JSON.parse((await cli('list', 'show', '--id', id, '--json')).stdout)
    return state!.publish.held.diff.block.removed === 5
  }, 30_000)
  state = state!
  const wrong = await cli('list', 'accept', '--id', id, '--digest', 'feedface', '--json')
  t.equal(wrong.code, 1)
  t.match(wrong.stderr, `the held build of list ${id} is ${state.publish.held.digest}, not feedface; nothing accepted`)
  t.equal((await feed(id)).headers['x-feed-held'], 'max_shrink_pct', 'still held')
  const ok = await cli('list', 'accept', '--id', id, '--digest', state.publish.held.digest, '--json')
  t.equal(ok.code, 0, ok.stderr)
  t.same(JSON.parse(ok.stdout), { id, accepted: state.publish.held.digest })
  await until('the accepted build', async () => (await feed(id)).body.toString() === hosts('11.30.1', 10).slice(5).join('\n') + '\n')
  t.equal((await feed(id)).headers['x-feed-held'], undefined)
  await until('list show to clear', async () => JSON.parse((await cli('list', 'show', '--id', id, '--json')).stdout).publish.held === null, 10_000)
  t.equal(Number(await heldGauge()), Number(before) - 1, 'one held feed fewer')
  // Once more: it says it was done already (issue 36), not that nothing is held.
  const again = await cli('list', 'accept', '--id', id)
  t.equal(again.code, 0, again.stderr)
  t.equal(again.stdout, `build ${state.publish.held.digest} of list ${id} was already accepted; nothing to do\n`)
})

t.test('a held rule lapses at its expiry; the tag moves only then', async (t) => {
  const lapse = Date.now() + 6000
  const id = await guardedList('lapsing', { maxGrowPct: 10 }, [...hosts('11.40.1', 5), ['11.40.9.9/32', lapse]])
  const first = await feed(id)
  t.match(first.body.toString(), '11.40.9.9/32')
  for (const v of hosts('11.40.2', 5)) await server.store.rules.upsertAccessRule(rule(v, 'lapsing'))
  await until('the hold', async () => (await feed(id)).headers['x-feed-held'] === 'max_grow_pct')
  t.equal((await feed(id)).headers.etag, first.headers.etag, 'held: the same tag')
  t.ok(Date.now() < lapse, 'still before the expiry')
  await until('the lapse', async () => !(await feed(id)).body.toString().includes('11.40.9.9'), 15_000)
  const after = await feed(id)
  t.ok(Date.now() >= lapse, 'not before its expiry')
  t.equal(after.body.toString(), hosts('11.40.1', 5).join('\n') + '\n', 'the published rules, less the lapsed one; the held batch still waits')
  t.equal(after.headers['x-feed-held'], 'max_grow_pct')
  t.not(after.headers.etag, first.headers.etag, 'the tag moved at the expiry')
})

t.test('a mass expiry alone never trips a guard', async (t) => {
  const lapse = Date.now() + 5000
  const id = await guardedList('mass-expiry', { maxShrinkPct: 10, minEntries: 3 }, [...hosts('11.50.1', 3), ...hosts('11.50.2', 12).map((h): [string, number] => [h, lapse])])
  const before = await feed(id)
  t.ok(Date.now() < lapse, 'read before the expiry')
  t.equal(entries(before), 15)
  await until('the expiry', async () => entries(await feed(id)) === 3, 15_000)
  t.equal((await feed(id)).headers['x-feed-held'], undefined, 'published, not held')
})

function entries (r: RawResponse): number {
  return Number(r.headers['x-feed-entry-count'])
}

t.test('a list that never published serves its first build only if it passes', async (t) => {
  const id = await guardedList('never', { minEntries: 5 }, hosts('11.60.1', 2))
  const r = await feed(id)
  t.equal(r.status, 503)
  t.equal(r.headers['x-feed-held'], 'min_entries')
  t.equal(JSON.parse(r.body.toString()).success, false)
  for (const v of hosts('11.60.2', 3)) await server.store.rules.upsertAccessRule(rule(v, 'never'))
  await until('the first passing build', async () => (await feed(id)).status === 200)
  t.equal(entries(await feed(id)), 5)
})

/** A CSV line split on commas outside quotes, and records that span lines (quoted line breaks). */
function csvRecords (text: string): string[][] {
  const out: string[][] = []
  let row: string[] = []
  let cell = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i++ } else if (c === '"') quoted = false
      else cell += c
    } else if (c === '"') quoted = true
    else if (c === ',') { row.push(cell); cell = '' } else if (c === '\n') { row.push(cell); out.push(row); row = []; cell = '' } else cell += c
  }
  if (cell !== '' || row.length > 0) { row.push(cell); out.push(row) }
  return out.slice(1)
}

/** The registry fixture's special space: not globally reachable rows, less the reachable ones, plus multicast. */
function fixtureSpecial (): NetworkSet {
  const rows = ['ipv4', 'ipv6'].flatMap((f) => csvRecords(readFileSync(new URL(`../fixtures/iana/iana-${f}-special-registry-1.csv`, import.meta.url), 'utf8')))
  // ::ffff:0:0/96 parses as IPv4 0.0.0.0/0; a feed never holds IPv4-mapped addresses (special-ranges.ts).
  const blocks = (reachable: string): string[] => rows.filter((r) => r[8]!.startsWith(reachable)).flatMap((r) => r[0]!.replace(/ \[\d+\]/, '').split(', ')).filter((b) => b !== '::ffff:0:0/96')
  return NetworkSet.parse(blocks('False')).subtract(NetworkSet.parse(blocks('True'))).union(NetworkSet.parse(['224.0.0.0/4', 'ff00::/8']))
}

t.test('the guard\'s special space is the one the registry fixture gives', async (t) => {
  t.ok(specialSpace().equals(fixtureSpecial()), 'src/feed/render/special-ranges.ts matches test/fixtures/iana/')
  for (const ip of ['10.1.2.3', '100.64.0.1', '192.0.0.8', '224.0.0.1', '255.255.255.255', 'fe80::1', '2001:db8::1', '3fff::1', '100:0:0:1::5']) t.ok(specialSpace().has(ip), `${ip} is special`)
  for (const ip of ['8.8.8.8', '192.0.0.9', '192.31.196.1', '2001:4:112::1', '64:ff9b::808:808', '2606:4700::1']) t.notOk(specialSpace().has(ip), `${ip} is not`)
})

t.test('--guard-mode drop leaves out exactly the special ranges of the IANA registries', async (t) => {
  const targets = ['10.0.0.0/8', '8.8.8.0/24', '100.64.0.0/10', '192.0.0.0/24', '192.0.0.9/32', '1.1.1.1/32', '169.254.1.0/24', '172.15.0.0/16',
    '172.16.5.5/32', '224.1.2.3/32', '240.0.0.0/8', '198.18.0.0/16', '203.0.113.7/32', '9.9.9.9/32', '192.88.99.0/24',
    '2606:4700::/32', '2001:db8::/32', 'fe80::/10', 'fd00::1/128', '2001::/16', '64:ff9b::/96', '64:ff9b:1::/48', 'ff02::1/128', '2002::/16']
  const id = await guardedList('drop', { rejectSpecial: true, mode: 'drop' }, targets)
  const r = await feed(id)
  t.equal(r.status, 200)
  t.equal(r.headers['x-feed-held'], undefined, 'drop mode does not hold')
  const expected = NetworkSet.parse(targets).subtract(fixtureSpecial())
  t.equal(r.body.toString(), expected.toLines(), 'the feed is the rules less the registry fixture\'s special space')
  t.ok(NetworkSet.parse(r.body.toString().split('\n').filter((l) => l !== '')).subtract(fixtureSpecial()).equals(NetworkSet.parse(r.body.toString().split('\n').filter((l) => l !== ''))), 'nothing special left')
  t.match(r.body.toString(), '192.0.0.9/32', 'a globally reachable row inside a special one stays')
})

t.test('workspace update sets the workspace feed\'s guards', async (t) => {
  const first = await rawRequest(server.base, '/v1/threat/feeds', { headers: auth })
  t.equal(first.status, 200)
  const set = await cli('workspace', 'update', '--workspace', ws, '--max-grow-pct', '0', '--json')
  t.equal(set.code, 0, set.stderr)
  t.same(JSON.parse(set.stdout).feedGuards, { maxGrowPct: 0 })
  await server.store.rules.upsertAccessRule(rule('11.70.0.1/32', 'workspace-feed'))
  await until('the workspace feed to hold', async () => (await rawRequest(server.base, '/v1/threat/feeds', { headers: auth })).headers['x-feed-held'] === 'max_grow_pct')
  const held = await rawRequest(server.base, '/v1/threat/feeds', { headers: auth })
  t.notMatch(held.body.toString(), '11.70.0.1/32', 'the new rule waits')
  const clear = await cli('workspace', 'update', '--workspace', ws, '--clear-guards', '--json')
  t.equal(clear.code, 0, clear.stderr)
  t.equal(JSON.parse(clear.stdout).feedGuards, undefined)
  await until('the workspace feed to publish', async () => (await rawRequest(server.base, '/v1/threat/feeds', { headers: auth })).body.toString().includes('11.70.0.1/32'))
  t.equal((await rawRequest(server.base, '/v1/threat/feeds', { headers: auth })).headers['x-feed-held'], undefined)
})

t.test('bad guard and shard options: usage errors', async (t) => {
  const cases: Array<{ description: string, args: string[], stderr: RegExp }> = [
    { description: 'min_entries 0', args: ['--min-entries', '0'], stderr: /--min-entries must be a whole number from 1 to 100000000, got "0"/ },
    { description: 'shrink over 100', args: ['--max-shrink-pct', '101'], stderr: /--max-shrink-pct must be a whole number from 0 to 100, got "101"/ },
    { description: 'grow not a number', args: ['--max-grow-pct', '5%'], stderr: /--max-grow-pct must be a whole number from 0 to 1000000, got "5%"/ },
    { description: 'v4 prefix 33', args: ['--min-prefix-v4', '33'], stderr: /--min-prefix-v4 must be a whole number from 0 to 32, got "33"/ },
    { description: 'v6 prefix 129', args: ['--min-prefix-v6', '129'], stderr: /--min-prefix-v6 must be a whole number from 0 to 128, got "129"/ },
    { description: 'unknown mode', args: ['--guard-mode', 'warn'], stderr: /--guard-mode must be one of hold, drop, got "warn"/ },
    { description: 'shards 0', args: ['--shards', '0'], stderr: /--shards must be a whole number from 1 to 64, got "0"/ },
    { description: 'shards 65', args: ['--shards', '65'], stderr: /--shards must be a whole number from 1 to 64, got "65"/ },
  ]
  for (const c of cases) {
    const r = await cli('list', 'create', '--workspace', ws, '--name', 'bad', ...c.args)
    t.equal(r.code, 2, c.description)
    t.match(r.stderr, c.stderr, c.description)
  }
  t.equal((await server.store.lists.findByName(ws, 'bad')).length, 0, 'nothing created')
})

t.test('removing the guards publishes what they held, and list show says nothing is held', async (t) => {
  const id = await guardedList('cleared', { maxGrowPct: 0 }, hosts('11.80.1', 3))
  t.equal((await feed(id)).status, 200)
  await server.store.rules.upsertAccessRule(rule('11.80.2.1/32', 'cleared'))
  await until('the hold', async () => (await feed(id)).headers['x-feed-held'] === 'max_grow_pct')
  const r = await cli('list', 'update', '--id', id, '--clear-guards', '--json')
  t.equal(r.code, 0, r.stderr)
  t.equal(JSON.parse(r.stdout).defaults.guards, undefined)
  await until('the publish', async () => (await feed(id)).body.toString().includes('11.80.2.1/32'))
  t.equal((await feed(id)).headers['x-feed-held'], undefined)
  await until('list show', async () => JSON.parse((await cli('list', 'show', '--id', id, '--json')).stdout).publish.held === null, 15_000)
})
