/**
 * A rule sent with the minimum expiry leaves the feed at its expiry, through HTTP, with the
 * production rebuild interval of 30 s in force (DECISIONS §3: a positive expiry below 60 becomes
 * 60; §5: a lapsed rule is never served, a snapshot expires at its earliest rule expiry). Takes a
 * minute of real time: the expiry is the spec's, not a test's.
 */
import t from 'tap'
import { feedModule } from '../helpers/feed-module.js'
import { startTestServer } from '../helpers/server.js'
import { rawRequest } from '../helpers/feed-server.js'

// Started by the test once the signal is applied.
const feeds = feedModule({ start: false })
const srv = await startTestServer({ env: { THREATFEED_FEED_REBUILD_MS: '30000' }, modules: feeds.modules, threadFeeds: feeds.service })
t.teardown(async () => {
  await feeds.stop()
  await srv.close()
})

async function feed (): Promise<string> {
  const r = await rawRequest(srv.url, '/v1/threat/feeds?format=plain', { headers: { authorization: `Bearer ${srv.keys.read}` } })
  if (r.status !== 200) throw new Error(`feed: ${r.status} ${r.body.toString()}`)
  return r.body.toString()
}

t.test('a rule with the minimum expiry disappears at its expiry, not a rebuild interval later', async (t) => {
  const posted = await fetch(`${srv.url}/v1/signal`, {
    method: 'POST',
    headers: srv.auth('write'),
    body: JSON.stringify([
      { type: 'access_rules', action: 'block', ip: '192.0.2.9', expiration: 1 },
      { type: 'access_rules', action: 'block', ip: '203.0.113.0/24', expiration: 86400 },
    ]),
  })
  await posted.arrayBuffer()
  t.equal(posted.status, 200)
  // Applied (read-your-writes), then the feeds start: their first build holds both rules, and the
  // next rebuild for new signals would be 30 s away.
  let expiresAt = 0
  for (const deadline = Date.now() + 5000; expiresAt === 0; await new Promise((resolve) => setTimeout(resolve, 20))) {
    const rules = await srv.store.rules.listAccessRules(srv.workspace.id, Date.now())
    expiresAt = rules.find((r) => r.target.value === '192.0.2.9/32')?.expiresAt ?? 0
    if (Date.now() > deadline) throw new Error('the signal was not applied')
  }
  const acceptedAt = expiresAt - 60_000
  t.ok(Math.abs(acceptedAt - Date.now()) < 5000, 'expiration 1 became 60 s')
  await feeds.service().start()
  t.equal(await feed(), '192.0.2.9/32\n203.0.113.0/24\n')

  let servedStale = false
  let gone = 0
  for (const deadline = expiresAt + 10_000; gone === 0;) {
    const before = Date.now()
    const body = await feed()
    if (!body.includes('192.0.2.9')) gone = before
    else if (before >= expiresAt) servedStale = true
    if (Date.now() > deadline) throw new Error(`still served ${Date.now() - expiresAt} ms after its expiry`)
    await new Promise((resolve) => setTimeout(resolve, expiresAt - Date.now() > 2000 ? 500 : 20))
  }
  t.notOk(servedStale, 'never served at or past its expiry')
  t.ok(gone >= expiresAt - 50, `not before its expiry (${gone - expiresAt} ms)`)
  t.ok(gone - expiresAt < 1000, `gone ${gone - expiresAt} ms after its expiry, with a 30 s rebuild interval`)
  t.equal(await feed(), '203.0.113.0/24\n')
})
