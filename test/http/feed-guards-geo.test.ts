/**
 * `--min-prefix-v4/-v6` judged on the database records a country or ASN expansion uses (issue 21),
 * never on coalesced output: with the shared MMDB fixtures (/work/shared/fixtures/geo), AS1221's
 * widest records are 1.128.0.0/11 and a /20 of IPv6, Sweden's (SE) widest IPv4 record a /25.
 * Through HTTP over the real FeedService: a rule that expands from a record wider than the guard
 * holds the build (X-Feed-Held, the last good bytes); one whose records all fit publishes, even
 * where the published output coalesces into wider networks than any record.
 */
import t from 'tap'
import { FeedService } from '../../src/feed/feed-service.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { loadGeoIndex } from '../../src/geo/load.js'
import type { AccessRuleInput, GuardSettings, Target } from '../../src/store/types.js'
import { bearer, rawRequest, startFeedServer, syncLists, type RawResponse } from '../helpers/feed-server.js'

const FIXTURES = '/work/shared/fixtures/geo'
const geo = await loadGeoIndex({ countryDb: `${FIXTURES}/GeoLite2-Country-Test.mmdb`, asnDb: `${FIXTURES}/GeoLite2-ASN-Test.mmdb` })
let service: FeedService | null = null
const server = await startFeedServer(async (store, ctx) => {
  service = new FeedService({ store, pool: { ...inProcessTasks(geo), setGeo: () => {} }, config: { feedRebuildMs: 0, pollMs: ctx.config.pollMs }, log: { info () {}, debug () {}, error () {}, warn () {} } as never, geo, awaitMs: 1500 })
  await service.start()
  return service
})
t.teardown(async () => {
  await service?.stop()
  await server.stop()
})
const ws = server.workspace.id

function rule (target: Target, feed: string): AccessRuleInput {
  return { kind: 'access_rule', workspaceId: ws, ruleRef: `${feed}:${target.value}`, labels: { feed }, reason: null, expiresAt: null, seq: 0, target, action: 'block', name: null, confidence: null, severity: null }
}
const ip = (value: string): Target => ({ type: 'ip', value })

const feed = (id: string, q = ''): Promise<RawResponse> => rawRequest(server.base, `/v1/threat/feeds/${id}${q}`, { headers: bearer(server.key) })

async function until (what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 40))
  }
}

t.test('the guard\'s view of the fixtures: the widest record of each key, per family', async (t) => {
  t.same(geo.widestRecord({ asn: 1221 }), { v4: 11, v6: 20 })
  t.same(geo.widestRecord({ country: 'SE' }), { v4: 25, v6: 29 })
  t.same(geo.widestRecord({ country: 'BT' }), { v4: 24, v6: Infinity }, 'no IPv6 record')
  t.same(geo.widestRecord({ country: 'ZZ' }), { v4: Infinity, v6: Infinity }, 'unknown')
  t.same(geo.widestRecord({ asn: 4_000_000_000 }), { v4: Infinity, v6: Infinity }, 'unknown')
})

t.test('min-prefix on expansion records: wider records hold, fitting records publish', async (t) => {
  const cases: Array<{ name: string, guards: GuardSettings, add: Target[], held: string | null, family?: string }> = [
    { name: 'asn-v4-held', guards: { minPrefixV4: 12 }, add: [{ type: 'asn', value: 'AS1221' }], held: 'min_prefix_v4' },
    { name: 'asn-v4-fits', guards: { minPrefixV4: 11 }, add: [{ type: 'asn', value: 'AS1221' }], held: null },
    { name: 'asn-v6-held', guards: { minPrefixV6: 21 }, add: [{ type: 'asn', value: 'AS1221' }], held: 'min_prefix_v6' },
    { name: 'asn-v6-fits', guards: { minPrefixV6: 20 }, add: [{ type: 'asn', value: 'AS1221' }], held: null },
    { name: 'country-held', guards: { minPrefixV4: 26 }, add: [{ type: 'country', value: 'SE' }], held: 'min_prefix_v4' },
    // SE's records are /25 or longer; with the two /25 rules beside them the published output
    // coalesces into wider networks, which the guard does not judge.
    { name: 'country-fits', guards: { minPrefixV4: 25 }, add: [{ type: 'country', value: 'SE' }, ip('89.160.20.0/25'), ip('89.160.20.128/25')], held: null },
  ]
  for (const c of cases) {
    await server.store.rules.upsertAccessRule(rule(ip('192.0.2.1/32'), c.name))
    const list = await server.store.lists.create({ workspaceId: ws, name: c.name, description: '', defaults: { guards: c.guards }, selector: { feed: c.name } })
    await syncLists(server)
    const first = await feed(list.id)
    t.equal(first.status, 200, `${c.name}: the first build passes`)
    for (const target of c.add) await server.store.rules.upsertAccessRule(rule(target, c.name))
    if (c.held !== null) {
      await until(`${c.name}: the hold`, async () => (await feed(list.id)).headers['x-feed-held'] === c.held)
      const r = await feed(list.id)
      t.equal(r.headers.etag, first.headers.etag, `${c.name}: the last good ETag`)
      t.same(r.body, first.body, `${c.name}: the last good bytes`)
    } else {
      await until(`${c.name}: the new build`, async () => (await feed(list.id)).body.length > first.body.length)
      const r = await feed(list.id)
      t.equal(r.headers['x-feed-held'], undefined, `${c.name}: published`)
      if (c.name === 'country-fits') {
        // The three rules were stored one by one: a build may have caught the first alone.
        const wide = async (): Promise<string[]> => (await feed(list.id, '?family=v4')).body.toString().split('\n').filter((l) => Number(l.split('/')[1]) < 25)
        await until(`${c.name}: a build of all three rules`, async () => (await wide()).length > 0)
        t.equal((await feed(list.id)).headers['x-feed-held'], undefined, `${c.name}: still published, with ${(await wide()).join(' ')} wider than /25`)
      }
    }
  }
})
