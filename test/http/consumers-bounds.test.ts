/**
 * What one feed key can make the server track (issue 35): floods of distinct User-Agents,
 * forwarded addresses and list names that do not exist, through HTTP, stay within
 * THREATFEED_CONSUMERS_PER_KEY in memory and in the store; what the bound lets go is counted in
 * /metrics, the admin API and `threatfeed consumers ls`.
 */
import t from 'tap'
import { rmSync } from 'node:fs'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { openStore } from '../../src/store/open.js'
import { consumersCli, eventually, makeFixture, poll, serverEnv, start, storedConsumers, type Fixture } from '../helpers/consumers.js'

const PER_KEY = 8

async function metric (port: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith(name + ' ') || l.startsWith(name + '{'))
  return line === undefined ? NaN : Number(line.slice(line.lastIndexOf(' ') + 1))
}

/** An admin key of the fixture's workspace (opened while no server runs). */
async function adminKey (f: Fixture): Promise<string> {
  const store = await openStore({ kind: 'embedded', dataDir: f.dir })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: f.workspaceId, hash: hashApiKey(key), scopes: ['admin'] })
  await store.close()
  return key
}

async function adminConsumers (port: number, key: string): Promise<{ items: Array<{ user_agent: string, address: string, list: string }>, dropped: { evicted: number, refused: number, removed: number } }> {
  const res = await fetch(`http://127.0.0.1:${port}/v1/admin/consumers`, { headers: { authorization: `Bearer ${key}` } })
  if (res.status !== 200) throw new Error(`admin consumers: ${res.status} ${await res.text()}`)
  return await res.json() as never
}

const longAgent = (i: number): string => `flood-${String(i).padStart(4, '0')}-` + 'x'.repeat(4096)

const floods = [
  {
    description: 'distinct 4 KB User-Agents',
    polls: (i: number) => ({ userAgent: longAgent(i) }),
    status: 200,
    // Each is cut to 256 characters; the most recently seen are kept.
    kept: (rows: Array<{ userAgent: string, address: string }>) => rows.map((r) => r.userAgent.slice(0, 10)).sort(),
    expected: Array.from({ length: PER_KEY }, (_, j) => longAgent(30 - PER_KEY + j).slice(0, 10)),
  },
  {
    description: 'distinct forwarded addresses behind a trusted proxy',
    polls: (i: number) => ({ from: '127.0.0.2', forwardedFor: `198.51.100.${i}` }),
    status: 200,
    kept: (rows: Array<{ userAgent: string, address: string }>) => rows.map((r) => r.address).sort(),
    expected: Array.from({ length: PER_KEY }, (_, j) => `198.51.100.${30 - PER_KEY + j}`).sort(),
  },
]

for (const flood of floods) {
  t.test(`a flood of ${flood.description} stays within the per-key bound, the least recently seen dropped`, async (t) => {
    const f = await makeFixture()
    t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
    const admin = await adminKey(f)
    // One thread: every poll meets the same tracker, so which ones are kept is exact (the
    // front-end threads' case is the last test).
    const { server } = await start(serverEnv(f.dir, { THREATFEED_CONSUMERS_PER_KEY: String(PER_KEY), THREATFEED_TRUSTED_PROXIES: '127.0.0.2', THREATFEED_CONSUMER_STALE: '1h', THREATFEED_HTTP_THREADS: '1' }))
    t.teardown(() => server.stop())
    const port = server.port
    for (let i = 0; i < 30; i++) t.equal((await poll(port, { key: f.key, ...flood.polls(i) })).status, flood.status)
    // A flush may fall mid-flood on a loaded machine: then the store briefly held one that was
    // evicted later, and the next flush's trim removed it (counted as removed).
    const stored = await storedConsumers(server, (c) => JSON.stringify(flood.kept(c)) === JSON.stringify(flood.expected))
    await eventually(() => metric(port, 'threatfeed_feed_consumers_dropped_total{reason="evicted"}'), (n) => n === 30 - PER_KEY)
    t.equal(stored.length, PER_KEY, `${PER_KEY} consumers stored, not 30`)
    t.same(flood.kept(stored), flood.expected, 'the most recently seen are the ones kept')
    t.ok(stored.every((c) => c.userAgent.length <= 256), 'User-Agents are stored cut to 256 characters')
    t.equal(await metric(port, 'threatfeed_feed_consumers_tracked'), PER_KEY, 'in memory: the bound')
    t.equal(await metric(port, 'threatfeed_feed_consumers_dropped_total{reason="evicted"}'), 30 - PER_KEY, '/metrics counts the evicted')
    const removed = await metric(port, 'threatfeed_feed_consumers_dropped_total{reason="removed"}')
    const answer = await eventually(() => adminConsumers(port, admin), (a) => a.dropped.evicted === 30 - PER_KEY)
    t.equal(answer.items.length, PER_KEY)
    t.same(answer.dropped, { evicted: 30 - PER_KEY, refused: 0, removed }, 'the admin API counts what was dropped')
    const text = await consumersCli(f.dir, ['ls', '--stale', '1h'])
    t.match(text.stdout, new RegExp(`dropped by the consumer bounds: ${30 - PER_KEY} evicted from memory, 0 refused, ${removed} removed from the store\\n$`))
  })
}

t.test('polls of lists that do not exist create no consumer', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  const { server } = await start(serverEnv(f.dir, { THREATFEED_CONSUMERS_PER_KEY: String(PER_KEY) }))
  t.teardown(() => server.stop())
  const port = server.port
  const cases = [
    { description: 'a 2 KB name', path: `/v1/threat/feeds/${'n'.repeat(2048)}` },
    { description: 'a name with escapes', path: '/v1/threat/feeds/no%20such%20list' },
    { description: 'an unknown list id', path: '/v1/threat/feeds/00000000-0000-4000-8000-000000000000' },
    { description: 'another name, with a query', path: '/v1/threat/feeds/gone?format=plain' },
  ]
  for (const c of cases) {
    for (let i = 0; i < 3; i++) t.equal((await poll(port, { key: f.key, path: c.path, userAgent: `ua-${i}` })).status, 404, c.description)
  }
  // One real poll afterwards: once it is stored, the 404s before it were flushed too.
  t.equal((await poll(port, { key: f.key, path: '/v1/threat/feeds/edl', userAgent: 'real' })).status, 200)
  const stored = await storedConsumers(server, (c) => c.length > 0)
  t.same(stored.map((c) => [c.userAgent, c.listId]), [['real', f.listId]], 'only the poll of the list that exists is a consumer')
  t.equal(await metric(port, 'threatfeed_feed_consumers_tracked'), 1)
})

t.test('the bound holds in the store across restarts: the least recently seen records are removed and counted', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  const env = serverEnv(f.dir, { THREATFEED_CONSUMERS_PER_KEY: String(PER_KEY), THREATFEED_CONSUMER_STALE: '1h', THREATFEED_HTTP_THREADS: '1' })
  for (const round of [0, 1]) {
    const { server } = await start(env)
    for (let i = 0; i < PER_KEY; i++) t.equal((await poll(server.port, { key: f.key, userAgent: `round-${round}-${i}` })).status, 200)
    // A new process starts with nothing in memory: its own consumers fit, the store holds both rounds' until trimmed.
    await storedConsumers(server, (c) => c.length === PER_KEY && c.every((x) => x.userAgent.startsWith(`round-${round}-`)))
    const stored = await server.store.consumers.list()
    t.equal(stored.length, PER_KEY, `round ${round}: ${PER_KEY} records`)
    t.ok(stored.every((c) => c.userAgent.startsWith(`round-${round}-`)), `round ${round}: the most recently seen kept`)
    if (round === 1) {
      t.equal(await metric(server.port, 'threatfeed_feed_consumers_dropped_total{reason="removed"}'), PER_KEY, '/metrics counts the removed')
      t.same(await server.store.consumers.drops(f.workspaceId), { evicted: 0, refused: 0, removed: PER_KEY })
    }
    await server.stop()
  }
})

t.test('with front-end threads each thread\'s tracker is bounded, and the store holds the key\'s bound', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  // Two front-end threads (the main thread answers none); connections land on either.
  const { server } = await start(serverEnv(f.dir, { THREATFEED_CONSUMERS_PER_KEY: String(PER_KEY), THREATFEED_CONSUMER_STALE: '1h', THREATFEED_HTTP_THREADS: '3' }))
  t.teardown(() => server.stop())
  const port = server.port
  for (let i = 0; i < 30; i++) t.equal((await poll(port, { key: f.key, userAgent: longAgent(i) })).status, 200)
  for (let i = 0; i < 3; i++) t.equal((await poll(port, { key: f.key, path: '/v1/threat/feeds/nowhere', userAgent: `lost-${i}` })).status, 404)
  // Every thread flushed (the tracked gauge counts each thread's last flush) and the trims ran.
  const tracked = await eventually(() => metric(port, 'threatfeed_feed_consumers_tracked'), (n) => n > 0)
  t.ok(tracked <= 3 * PER_KEY, `in memory: at most the bound per thread (${tracked})`)
  const stored = await eventually(() => server.store.consumers.list(), (c) => c.length === PER_KEY, 15_000)
  t.equal(stored.length, PER_KEY, 'the store holds the key\'s bound')
  t.ok(stored.every((c) => c.userAgent.startsWith('flood-') && c.userAgent.length <= 256), 'cut User-Agents, and no consumer for the list that does not exist')
  const evicted = await eventually(() => metric(port, 'threatfeed_feed_consumers_dropped_total{reason="evicted"}'), (n) => n >= 30 - 3 * PER_KEY)
  t.ok(evicted >= 30 - 3 * PER_KEY, `the threads' evictions are counted (${evicted})`)
})
