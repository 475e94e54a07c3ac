/**
 * A feed that cannot be answered yet waits, then answers 500 — never 503, which SPEC §7.2 does not
 * list (issue 15 §5). Two ways there: the feed's build fails or takes longer than the deadline
 * (FeedService awaitMs), and a list request arrives before the list catalog could be loaded
 * (ListDirectory awaitMs). Both answer the feed error body of SPEC 2.9; both succeed when the
 * cause goes away within the deadline.
 */
import t from 'tap'
import { FeedService } from '../../src/feed/feed-service.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { ThreatfeedError } from '../../src/errors.js'
import { buildGeoIndex } from '../../src/geo/load.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestSnapshot, rawRequest, StaticFeedSource, startFeedServer } from '../helpers/feed-server.js'

const UNAVAILABLE = { success: false, error: 'feed unavailable; retry shortly', details: {} }
const fail = (): Promise<never> => Promise.reject(new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE'))

t.test('a feed whose build cannot finish within the deadline: 500 with the feed error body, after waiting', async (t) => {
  const geo = buildGeoIndex({})
  const outage = { down: true }
  let feeds: FeedService | null = null
  const server = await startFeedServer(async (store, ctx) => {
    // The rule store is down from the start: there are no rules in memory to build from.
    const rules = new Proxy(store.rules, {
      get: (r, p) => {
        if ((p === 'accessRulesChangedSince' || p === 'revisionOf') && outage.down) return fail
        const v: unknown = Reflect.get(r, p)
        return typeof v === 'function' ? v.bind(r) : v
      },
    })
    const flaky = new Proxy(store as Store, { get: (s, p) => p === 'rules' ? rules : Reflect.get(s, p, s) })
    feeds = new FeedService({ store: flaky, pool: { ...inProcessTasks(geo), setGeo: () => {} }, config: { feedRebuildMs: 0, pollMs: ctx.config.pollMs }, log: ctx.log, geo, awaitMs: 400 })
    await feeds.start()
    return feeds
  })
  t.teardown(async () => { await feeds?.stop(); await server.stop() })
  await server.store.rules.upsertAccessRule({ kind: 'access_rule', workspaceId: server.workspace.id, ruleRef: null, labels: {}, reason: null, expiresAt: null, seq: 0, target: { type: 'ip', value: '192.0.2.1/32' }, action: 'block', name: null, confidence: null, severity: null })

  const started = Date.now()
  const r = await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(server.key) })
  t.ok(Date.now() - started >= 390, `waited ${Date.now() - started} ms for the build`)
  t.equal(r.status, 500)
  t.match(r.headers['content-type'], /^application\/json/)
  t.same(JSON.parse(r.body.toString()), UNAVAILABLE)
  const head = await rawRequest(server.base, '/v1/threat/feeds', { method: 'HEAD', headers: bearer(server.key) })
  t.equal(head.status, 500, 'HEAD: the same status')
  t.equal(head.body.length, 0, 'HEAD: no body')

  outage.down = false
  const back = await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(server.key) })
  t.equal(back.status, 200, 'once the store answers, the next request waits for the build and gets the feed')
  t.equal(back.body.toString(), '192.0.2.1/32\n')
})

t.test('a list request before the list catalog could be loaded waits for it, then answers 500', async (t) => {
  const cases = [
    { description: 'an outage shorter than the deadline', outageMs: 300, awaitMs: 5000, status: 200, body: '2001:db8::/32\n' },
    { description: 'an outage longer than the deadline', outageMs: Infinity, awaitMs: 400, status: 500, body: JSON.stringify(UNAVAILABLE) },
  ]
  for (const c of cases) {
    const source = new StaticFeedSource()
    let until = Infinity
    const server = await startFeedServer(() => source, {
      loadLists: false,
      listAwaitMs: c.awaitMs,
      listSource: (store) => ({ revisions: () => Date.now() < until ? fail() : store.revisions(), lists: store.lists, keys: store.keys, workspaces: store.workspaces }),
    })
    t.teardown(() => server.stop())
    const list = await server.store.lists.create({ workspaceId: server.workspace.id, name: 'early', description: '', defaults: { family: 'v6' }, selector: {} })
    source.set(buildTestSnapshot({ workspaceId: server.workspace.id, feedId: list.id, networks: ['192.0.2.1/32', '2001:db8::/32'], lastModified: Date.UTC(2026, 0, 1) }))
    const started = Date.now()
    until = started + c.outageMs
    const r = await rawRequest(server.base, '/v1/threat/feeds/early', { headers: bearer(server.key) })
    const waited = Date.now() - started
    t.equal(r.status, c.status, `${c.description}: ${c.status}`)
    t.equal(r.body.toString(), c.body, `${c.description}: body`)
    t.ok(waited >= Math.min(c.outageMs, c.awaitMs) - 10, `${c.description}: waited ${waited} ms`)
  }
})
