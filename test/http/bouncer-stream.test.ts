/**
 * The CrowdSec bouncer API through HTTP (docs/bouncers.md), on a server composed as `threatfeed
 * serve` does, with one HTTP thread (the main thread answers) and with two (a front-end thread
 * forwards): a bouncer that applies each stream answer as the bouncers do (new: add, deleted:
 * remove) holds exactly the plain feed after every round of changes — hosts added and removed, a
 * /25 pair coalescing into a /24 and splitting back, an allow rule carving a blocked /24, IPv6 —
 * and an idle pull answers nothing new. Plus the decision's shape, scopes, live mode and gzip.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { startRealServer, type RealServer } from '../helpers/real-server.js'
import { rawRequest } from '../helpers/feed-server.js'
import { decisionId4 } from '../../src/feed/bouncer-decisions.js'

t.setTimeout(300_000)

interface Decision { duration: string, id: number, origin: string, scenario: string, scope: string, type: string, value: string }
interface StreamAnswer { new: Decision[] | null, deleted: Decision[] | null }

/** Seconds of a Go duration as the bouncers parse it (h, m, s parts). */
function seconds (d: string): number {
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(\d+)s$/.exec(d)
  if (m === null) throw new Error(`not a Go duration: ${d}`)
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3])
}

const cidrOf = (d: Decision): string => d.scope === 'Ip' ? `${d.value}/${d.value.includes(':') ? 128 : 32}` : d.value

for (const threads of ['1', '2']) {
  t.test(`stream and live mode, ${threads} HTTP thread(s)`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'tf-bouncer-'))
    const s: RealServer = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '0', THREATFEED_HTTP_THREADS: threads })
    t.teardown(async () => {
      await s.server.stop()
      rmSync(dir, { recursive: true, force: true })
    })
    const auth = { authorization: `Bearer ${s.key}` }
    const signal = async (ops: unknown[]): Promise<void> => {
      const r = await fetch(`${s.base}/v2/signal`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(ops) })
      if (r.status >= 300) throw new Error(`signal: ${r.status} ${await r.text()}`)
    }
    const upsert = (ref: string, ip: string, action: 'block' | 'allow' = 'block'): unknown => ({ kind: 'access_rule', op: 'upsert', rule_ref: ref, rule: { target: { ip }, action } })
    const remove = (ref: string): unknown => ({ kind: 'access_rule', op: 'delete', rule_ref: ref })
    const plain = async (): Promise<{ etag: string, set: string[] }> => {
      const r = await fetch(`${s.base}/v1/threat/feeds?format=plain&family=both`, { headers: auth })
      return { etag: r.headers.get('etag')!, set: (await r.text()).split('\n').filter((l) => l !== '').sort() }
    }
    const settled = async (etag: string): Promise<string[]> => {
      let last = etag
      let still = 0
      for (let i = 0; i < 300; i++) {
        const p = await plain()
        if (p.etag !== etag && p.etag === last) still++
        else still = 0
        last = p.etag
        if (still >= 3) return p.set
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      throw new Error('the feed did not settle')
    }
    const pull = async (query: string, agent = 'crowdsec-custom-bouncer/v0.0.15', key = s.key): Promise<StreamAnswer> => {
      const r = await rawRequest(s.base, `/v1/decisions/stream?${query}`, { headers: { 'x-api-key': key, 'user-agent': agent, 'accept-encoding': 'gzip' } })
      if (r.status !== 200) throw new Error(`stream: ${r.status} ${r.body.toString()}`)
      t.equal(r.headers['content-type'], 'application/json')
      const text = (r.headers['content-encoding'] === 'gzip' ? gunzipSync(r.body) : r.body).toString()
      return JSON.parse(text) as StreamAnswer
    }
    const held = new Set<string>()
    const apply = (a: StreamAnswer): void => {
      for (const d of a.deleted ?? []) held.delete(cidrOf(d))
      for (const d of a.new ?? []) held.add(cidrOf(d))
    }

    await signal([upsert('a', '192.0.2.7'), upsert('p1', '198.51.100.0/25'), upsert('p2', '198.51.100.128/25'), upsert('v6', '2001:db8::1')])
    let feed = await settled('')
    t.same(feed, ['192.0.2.7/32', '198.51.100.0/24', '2001:db8::1/128'])

    const first = await pull('startup=true')
    t.equal(first.deleted, null, 'a first startup pull deletes nothing')
    t.same(first.new!.map((d) => [d.scope, d.value]), [['Ip', '192.0.2.7'], ['Range', '198.51.100.0/24'], ['Ip', '2001:db8::1']], 'hosts are Ip with the bare address, wider prefixes Range')
    const host = first.new![0]!
    t.same(Object.keys(host), ['duration', 'id', 'origin', 'scenario', 'scope', 'type', 'value'])
    t.match(host, { origin: 'threatfeed', type: 'ban', scenario: 'threatfeed:main', id: decisionId4(0xc0000207, 32) })
    t.ok(Number.isSafeInteger(host.id) && host.id > 0, 'a positive 53-bit id')
    const s0 = seconds(host.duration)
    t.ok(s0 > 86_400 - 60 && s0 <= 86_400, `no rule expires: the cap, 24h (${host.duration})`)
    apply(first)
    t.same([...held].sort(), feed)

    t.same(await pull(''), { new: null, deleted: null }, 'nothing changed: nothing to apply')
    t.same(await pull('startup=false'), { new: null, deleted: null })

    // Rounds of changes; after each, the bouncer's set is the plain feed's.
    const rounds: Array<[string, unknown[]]> = [
      ['a /25 goes: the /24 splits back', [remove('p2')]],
      ['a host added, the /25 pair again', [upsert('b', '203.0.113.9'), upsert('p2', '198.51.100.128/25')]],
      ['an allow carves the /24', [upsert('al', '198.51.100.64/26', 'allow')]],
      ['the allow goes, a host goes, IPv6 added', [remove('al'), remove('a'), upsert('v6b', '2001:db8:1::/48')]],
      ['everything goes', [remove('b'), remove('p1'), remove('p2'), remove('v6'), remove('v6b')]],
      ['back', [upsert('c', '192.0.2.99')]],
    ]
    for (const [what, ops] of rounds) {
      const before = (await plain()).etag
      await signal(ops)
      feed = await settled(before)
      const a = await pull('')
      apply(a)
      t.same([...held].sort(), feed, `after "${what}" the bouncer holds the feed`)
      for (const d of a.deleted ?? []) t.equal(d.duration, '0s')
    }

    // Another bouncer of the same key (another User-Agent) has its own cursor: a startup pull.
    const other = await pull('startup=true', 'crowdsec-firewall-bouncer/v0.0.31')
    t.same(other.new!.map(cidrOf), feed)
    t.same(await pull('', 'crowdsec-firewall-bouncer/v0.0.31'), { new: null, deleted: null })

    // Scopes and origins filter what is sent.
    const beforeRange = (await plain()).etag
    await signal([upsert('r', '10.20.0.0/16')])
    feed = await settled(beforeRange)
    const ipOnly = await pull('startup=true&scopes=ip', 'scoped/1')
    t.same(ipOnly.new!.map((d) => d.scope), ['Ip'], 'scopes=ip: hosts only')
    const rangeOnly = await pull('startup=true&scopes=Range', 'scoped/2')
    t.same(rangeOnly.new!.map((d) => d.value), ['10.20.0.0/16'], 'scopes=Range (any letter case): ranges only')
    t.same(await pull('startup=true&scopes=country', 'scoped/3'), { new: null, deleted: null }, 'a scope this set has none of selects nothing, as LAPI')
    t.same(await pull('startup=true&origins=crowdsec,cscli', 'scoped/4'), { new: null, deleted: null }, 'other origins select nothing')
    t.equal((await pull('startup=true&origins=threatfeed&community_pull=false&additional_pull=false', 'scoped/5')).new!.length, 2)

    // Live mode.
    const live = async (query: string): Promise<Decision[] | null> => {
      const r = await fetch(`${s.base}/v1/decisions?${query}`, { headers: { 'x-api-key': s.key } })
      t.equal(r.status, 200, query)
      return await r.json() as Decision[] | null
    }
    t.same((await live('ip=10.20.3.4'))!.map((d) => d.value), ['10.20.0.0/16'], 'the range holding the address')
    t.same((await live('ip=192.0.2.99'))!.map((d) => [d.scope, d.value]), [['Ip', '192.0.2.99']])
    t.equal(await live('ip=192.0.2.98'), null, 'no decision: null, as LAPI')
    t.same((await live('range=10.20.4.0/24'))!.map((d) => d.value), ['10.20.0.0/16'], 'a range inside a published one')
    t.equal(await live('range=10.0.0.0/8'), null, 'a range wider than any published one')
    t.equal((await live(''))!.length, 2, 'no filter: every decision')

    // gzip when accepted and worth it.
    const many = Array.from({ length: 40 }, (_, i) => upsert(`m${i}`, `100.64.${i}.1`))
    const before = (await plain()).etag
    await signal(many)
    feed = await settled(before)
    const big = await rawRequest(s.base, '/v1/decisions/stream?startup=true', { headers: { 'x-api-key': s.key, 'user-agent': 'gz/1', 'accept-encoding': 'gzip' } })
    t.equal(big.headers['content-encoding'], 'gzip')
    t.equal((JSON.parse(gunzipSync(big.body).toString()) as StreamAnswer).new!.length, feed.length)
    const identity = await rawRequest(s.base, '/v1/decisions/stream?startup=true', { headers: { 'x-api-key': s.key, 'user-agent': 'id/1' } })
    t.equal(identity.headers['content-encoding'], undefined)
    t.equal((JSON.parse(identity.body.toString()) as StreamAnswer).new!.length, feed.length)
  })
}
