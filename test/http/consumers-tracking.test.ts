/**
 * Feed consumer tracking through the public surface (issue 20): the server as main.ts composes
 * it, polled over real connections from distinct loopback addresses, and `threatfeed consumers
 * ls` reading what the server flushed to the store.
 */
import t from 'tap'
import { rmSync } from 'node:fs'
import { consumersCli, consumersLs, eventually, makeFixture, poll, serverEnv, start, storedConsumers, type Row } from '../helpers/consumers.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const find = (rows: Row[], userAgent: string, client: string | null = null): Row | undefined => rows.find((r) => r.user_agent === userAgent && r.client === client)

t.test('304 and 200 pollers, direct and through a trusted proxy, and a spoofed X-Forwarded-For', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  // 127.0.0.2 is the proxy (nginx in front); every other loopback address is a client.
  const { server } = await start(serverEnv(f.dir, { THREATFEED_TRUSTED_PROXIES: '127.0.0.2/32, 10.0.0.0/8' }))
  t.teardown(() => server.stop())
  const port = server.port

  // A 304 poller: a 200, then three revalidations.
  const first = await poll(port, { key: f.key, userAgent: 'PAN-OS/10.2', from: '127.0.0.3' })
  t.equal(first.status, 200)
  for (let i = 0; i < 3; i++) t.equal((await poll(port, { key: f.key, userAgent: 'PAN-OS/10.2', from: '127.0.0.3', ifNoneMatch: first.etag })).status, 304)
  // A 200 poller without validators, on the list, in another format.
  for (let i = 0; i < 2; i++) t.equal((await poll(port, { key: f.key, userAgent: 'curl/8.5', from: '127.0.0.4', path: '/v1/threat/feeds/edl?format=dialect_b&family=v4' })).status, 200)
  // Through the proxy: the client forged the left entry, the proxy appended the address it saw.
  t.equal((await poll(port, { key: f.key, userAgent: 'FortiGate-600E', from: '127.0.0.2', forwardedFor: '198.51.100.9, 203.0.113.5' })).status, 200)
  // Two proxies in a row: the rightmost address that is not a trusted proxy is the client.
  t.equal((await poll(port, { key: f.key, userAgent: 'two-hops', from: '127.0.0.2', forwardedFor: '192.0.2.44, 10.1.2.3' })).status, 200)
  // Not from a trusted proxy: the header is not believed.
  t.equal((await poll(port, { key: f.key, userAgent: 'spoofer', from: '127.0.0.5', forwardedFor: '203.0.113.66' })).status, 200)
  // Same address and User-Agent as the first poller, told apart by ?client=.
  t.equal((await poll(port, { key: f.key, userAgent: 'PAN-OS/10.2', from: '127.0.0.3', path: '/v1/threat/feeds?client=fw-b.branch:2' })).status, 200)
  // Not authenticated: not a consumer.
  t.equal((await poll(port, { key: 'tf_' + 'x'.repeat(43), userAgent: 'stranger', from: '127.0.0.6' })).status, 401)

  await storedConsumers(server, (c) => c.length === 6 && c.reduce((n, x) => n + x.polls, 0) === 10)
  // A threshold far above the command's own start-up time on a loaded machine.
  const rows = await consumersLs(f.dir, ['--stale', '1h'])
  t.equal(rows.length, 6, 'six consumers; the 401 is none')
  t.match(find(rows, 'PAN-OS/10.2'), {
    address: '127.0.0.3', client: null, list: '*', list_name: null, variant: 'plain|both|block|', stale: false,
    last_status: 304, behind: false, versions_behind: 0, polls: { total: 4, ok: 1, not_modified: 3, client_errors: 0, server_errors: 0 },
  })
  t.type(find(rows, 'PAN-OS/10.2')?.last_200, 'string')
  t.match(find(rows, 'curl/8.5'), {
    address: '127.0.0.4', list: f.listId, list_name: 'edl', variant: 'dialect_b|v4|block|', last_status: 200, behind: false,
    polls: { total: 2, ok: 2, not_modified: 0 },
  })
  t.match(find(rows, 'FortiGate-600E'), { address: '203.0.113.5', last_status: 200 })
  t.match(find(rows, 'two-hops'), { address: '192.0.2.44' })
  t.match(find(rows, 'spoofer'), { address: '127.0.0.5' }, 'a forged X-Forwarded-For from an untrusted peer is ignored')
  t.match(find(rows, 'PAN-OS/10.2', 'fw-b.branch:2'), { address: '127.0.0.3', polls: { total: 1, ok: 1 } })

  const text = await consumersCli(f.dir, ['ls', '--stale', '1h'])
  t.equal(text.code, 0)
  t.match(text.stdout, /^STATE +ADDRESS +CLIENT +USER-AGENT +LIST +VARIANT +LAST SEEN +LAST +LAST 200 +POLLS\/H +VERSION +FIRST SEEN +KEY\n/)
  t.match(text.stdout, /fresh +203\.0\.113\.5 +- +FortiGate-600E +\(workspace feed\) +plain\|both\|block\| /)
})

t.test('a poller that stops turns stale within the threshold and recovers; one failing with 4xx is stale too', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  const { server, logs } = await start(serverEnv(f.dir))
  t.teardown(() => server.stop())
  const port = server.port
  const metric = async (name: string): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
    const line = text.split('\n').find((l) => l.startsWith(name + ' '))
    return line === undefined ? NaN : Number(line.slice(name.length + 1))
  }
  for (let i = 0; i < 4; i++) {
    t.equal((await poll(port, { key: f.key, userAgent: 'edl-poller' })).status, 200)
    await sleep(150)
  }
  // Polls of the list with a format that does not exist: 400 three times. (A list that does not
  // exist is nobody's: consumers-bounds.test.ts.)
  for (let i = 0; i < 3; i++) t.equal((await poll(port, { key: f.key, userAgent: 'misconfigured', path: '/v1/threat/feeds/edl?format=gone' })).status, 400)
  const staleAt = Date.now()
  const staleLine = (userAgent: string) => () => eventually(async () => logs.find((l) => l.msg === 'feed consumer is stale' && (l.consumer as { userAgent: string }).userAgent === userAgent), (l) => l !== undefined)
  t.match(await staleLine('misconfigured')(), { reason: 'failing' })
  let rows = await consumersLs(f.dir)
  t.match(find(rows, 'misconfigured'), { stale: true, stale_reason: 'failing', list: f.listId, variant: '', last_status: 400, polls: { client_errors: 3 } })
  const states = rows.map((r) => r.stale ? 'stale' : 'fresh')
  t.same(states, [...states].sort((x, y) => (x === 'stale' ? 0 : 1) - (y === 'stale' ? 0 : 1)), 'stale ones first')

  // The poller stopped: stale once 2 s (the setting; its own intervals are far shorter) have passed.
  const line = await staleLine('edl-poller')()
  rows = await consumersLs(f.dir)
  t.match(find(rows, 'edl-poller'), { stale: true, stale_reason: 'silent' })
  t.ok(line !== undefined, 'a log line when it turns stale')
  t.ok(Date.parse(String(line?.time)) - staleAt < 2000 + 3000, 'within the threshold, plus a flush and an evaluation')
  t.match(line, { level: 40, reason: 'silent', consumer: { address: '127.0.0.1', list: '*', variant: 'plain|both|block|', keyId: /^[0-9a-f-]{36}$/ } })
  t.equal(await eventually(() => metric('threatfeed_feed_consumers_stale'), (n) => n === 2), 2, '/metrics: two stale')
  t.equal(await metric('threatfeed_feed_consumers_fresh'), 0)

  t.equal((await poll(port, { key: f.key, userAgent: 'edl-poller' })).status, 200)
  const recovered = await eventually(async () => logs.find((l) => l.msg === 'feed consumer recovered'), (l) => l !== undefined)
  // The gauge before the command: the poller is silent again 2 s later, and the command can take
  // longer than that to start under load (it then read 0, whatever the build).
  t.equal(await eventually(() => metric('threatfeed_feed_consumers_fresh'), (n) => n === 1), 1, '/metrics: one fresh again')
  t.match(recovered, { level: 30, consumer: { userAgent: 'edl-poller' } }, 'a log line when it recovers')
  // The command takes a while to start under load: a threshold it cannot outlast.
  rows = await consumersLs(f.dir, ['--stale', '30s'])
  t.match(find(rows, 'edl-poller'), { stale: false, stale_reason: null })

  // --stale stretches the threshold for the listing.
  rows = await consumersLs(f.dir, ['--stale', '1h'])
  t.equal(find(rows, 'edl-poller')?.stale, false)
  t.equal(find(rows, 'misconfigured')?.stale, true, 'failing polls are stale whatever the threshold')
})

t.test('a poller holding an old ETag shows as behind until it fetches the new version', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  const { server } = await start(serverEnv(f.dir, { THREATFEED_CONSUMER_STALE: '1h' }))
  t.teardown(() => server.stop())
  const port = server.port
  const old = await poll(port, { key: f.key, userAgent: 'slow-fw', path: '/v1/threat/feeds?family=v4' })
  t.equal(old.status, 200)
  await storedConsumers(server, (c) => c.length === 1)
  let rows = await consumersLs(f.dir, ['--stale', '1h'])
  t.match(find(rows, 'slow-fw'), { behind: false, versions_behind: 0 })

  // The feed changes (one more block); Last-Modified has whole seconds, so a second passes first.
  await sleep(1100)
  const posted = await fetch(`http://127.0.0.1:${port}/v1/signal`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.key}`, 'content-type': 'application/json' },
    body: JSON.stringify([{ type: 'access_rules', action: 'block', ip: '192.0.2.77' }]),
  })
  t.equal(posted.status, 200)
  // Another appliance's poll sees the new version (and builds it).
  const fresh = await eventually(() => poll(port, { key: f.key, userAgent: 'quick-fw', path: '/v1/threat/feeds?family=v4' }), (r) => r.body.includes('192.0.2.77'))
  t.not(fresh.etag, old.etag)
  // Until the flush after the poll that got the new version (with front-end threads, a thread's
  // flush can carry quick-fw's earlier poll of the old one alone).
  await storedConsumers(server, (c) => c.length === 2 && c.find((x) => x.userAgent === 'quick-fw')?.held?.etag === fresh.etag)
  rows = await consumersLs(f.dir, ['--stale', '1h'])
  t.match(find(rows, 'slow-fw'), { behind: true, versions_behind: 1, stale: false })
  t.match(find(rows, 'quick-fw'), { behind: false })
  t.match((await consumersCli(f.dir, ['ls', '--stale', '1h'])).stdout, /slow-fw .* behind /)

  // A second change: two versions behind, counted in the feed-version record's history.
  await sleep(1100)
  const second = await fetch(`http://127.0.0.1:${port}/v1/signal`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.key}`, 'content-type': 'application/json' },
    body: JSON.stringify([{ type: 'access_rules', action: 'block', ip: '192.0.2.78' }]),
  })
  t.equal(second.status, 200)
  await eventually(() => poll(port, { key: f.key, userAgent: 'quick-fw', path: '/v1/threat/feeds?family=v4' }), (r) => r.body.includes('192.0.2.78'))
  rows = await consumersLs(f.dir, ['--stale', '1h'])
  t.match(find(rows, 'slow-fw'), { behind: true, versions_behind: 2 })

  // It polls with its old ETag: a 200 with the new version, and it is current.
  t.equal((await poll(port, { key: f.key, userAgent: 'slow-fw', path: '/v1/threat/feeds?family=v4', ifNoneMatch: old.etag })).status, 200)
  await storedConsumers(server, (c) => c.find((x) => x.userAgent === 'slow-fw')?.polls === 2)
  rows = await consumersLs(f.dir, ['--stale', '1h'])
  t.match(find(rows, 'slow-fw'), { behind: false, polls: { total: 2, ok: 2 } })
})
