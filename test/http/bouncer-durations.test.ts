/**
 * Decision durations through HTTP (docs/bouncers.md "Durations"): each network's is the time
 * until it lapses — the earliest, over its addresses, of the latest expiry of a rule covering
 * the address — capped at THREATFEED_BOUNCER_MAX_DURATION; a network whose lapse moves later
 * with the same content (a rule's expiry extended) is announced again with its new duration.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startRealServer } from '../helpers/real-server.js'

t.setTimeout(180_000)

interface Decision { duration: string, scope: string, value: string }
interface StreamAnswer { new: Decision[] | null, deleted: Decision[] | null }

function seconds (d: string): number {
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(\d+)s$/.exec(d)
  if (m === null) throw new Error(`not a Go duration: ${d}`)
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3])
}

const dir = mkdtempSync(join(tmpdir(), 'tf-bouncer-dur-'))
const s = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '0', THREATFEED_BOUNCER_MAX_DURATION: '3h' })
t.teardown(async () => {
  await s.server.stop()
  rmSync(dir, { recursive: true, force: true })
})
t.test('durations and retimes', async (t) => {
  const auth = { authorization: `Bearer ${s.key}` }
  const signal = async (ops: unknown[]): Promise<void> => {
    const r = await fetch(`${s.base}/v2/signal`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(ops) })
    if (r.status >= 300) throw new Error(`signal: ${r.status} ${await r.text()}`)
  }
  const upsert = (ref: string, ip: string, expiresIn?: number): unknown => ({ kind: 'access_rule', op: 'upsert', rule_ref: ref, rule: { target: { ip }, action: 'block' }, ...(expiresIn === undefined ? {} : { expires_in: expiresIn }) })
  const pull = async (query: string): Promise<StreamAnswer> => {
    const r = await fetch(`${s.base}/v1/decisions/stream?${query}`, { headers: { 'x-api-key': s.key, 'user-agent': 'dur/1' } })
    t.equal(r.status, 200)
    return await r.json() as StreamAnswer
  }
  const byValue = (a: StreamAnswer): Record<string, number> => Object.fromEntries((a.new ?? []).map((d) => [d.value, seconds(d.duration)]))

  await signal([
    upsert('x', '192.0.2.0/25', 3600), upsert('y', '192.0.2.128/25', 7200),
    upsert('h', '203.0.113.1'),
    upsert('z', '198.51.100.0/24', 600), upsert('z1', '198.51.100.7', 5000),
    upsert('w', '2001:db8::/48', 1200),
  ])
  let first: StreamAnswer = { new: null, deleted: null }
  for (let i = 0; i < 200 && (first.new?.length ?? 0) < 4; i++) {
    first = await pull('startup=true')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const d = byValue(first)
  const near = (got: number | undefined, want: number, what: string): void => {
    t.ok(got !== undefined && got <= want && got > want - 30, `${what}: ${got} s, at most ${want} and within 30 s of it`)
  }
  near(d['192.0.2.0/24'], 3600, 'a /24 coalesced from a /25 lapsing in 1 h and one in 2 h lapses in 1 h')
  near(d['203.0.113.1'], 3 * 3600, 'no expiry: the cap (THREATFEED_BOUNCER_MAX_DURATION=3h)')
  near(d['198.51.100.0/24'], 600, 'a /24 rule over a longer host rule: the /24 still lapses in 10 min (the host alone is not the /24)')
  near(d['2001:db8::/48'], 1200, 'IPv6')
  t.same(await pull(''), { new: null, deleted: null }, 'an idle pull')

  // The /25 lapsing first gets a later expiry: the content is the same, the /24 lapses in 2 h now.
  await signal([upsert('x', '192.0.2.0/25', 10_800)])
  let again: StreamAnswer = { new: null, deleted: null }
  for (let i = 0; i < 200 && again.new === null; i++) {
    again = await pull('')
    if (again.new === null) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.same(again.new?.map((x) => x.value), ['192.0.2.0/24'], 'the retimed network alone is announced again')
  t.equal(again.deleted, null)
  near(byValue(again)['192.0.2.0/24'], 7200, 'with its new duration')
  t.same(await pull(''), { new: null, deleted: null }, 'and only once')

  // Live mode says the same durations.
  const live = await (await fetch(`${s.base}/v1/decisions?ip=192.0.2.200`, { headers: { 'x-api-key': s.key } })).json() as Decision[]
  near(seconds(live[0]!.duration), 7200, 'live mode')
})
