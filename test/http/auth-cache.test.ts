/**
 * Credentials through HTTP (SPEC §5, DECISIONS §2): Basic must be well-formed base64 (RFC 4648
 * §4) — trailing junk is refused, not skipped — and the cache of authenticated keys is keyed on the
 * key, so no number of spellings of one credential (runs of whitespace, the scheme's case, Bearer
 * or Basic, feeds or signals) makes it grow. Its size is the public gauge
 * threatfeed_auth_cache_bytes.
 */
import t from 'tap'
import { startTestServer } from '../helpers/server.js'
import { feedModule } from '../helpers/feed-module.js'

const feeds = feedModule()
const srv = await startTestServer({ modules: feeds.modules })
t.teardown(async () => { await feeds.stop(); await srv.close() })

const b64 = (s: string): string => Buffer.from(s).toString('base64')
const feed = (authorization: string) => fetch(`${srv.url}/v1/threat/feeds`, { headers: { Authorization: authorization } })
const cacheBytes = async (): Promise<number> => {
  const text = await (await fetch(`${srv.url}/metrics`)).text()
  const m = /^threatfeed_auth_cache_bytes (\d+)$/m.exec(text)
  if (m === null) throw new Error('no threatfeed_auth_cache_bytes in /metrics')
  return Number(m[1])
}

t.test('Basic credentials: well-formed base64 only', async (t) => {
  const key = srv.keys.read
  const good = b64(`api:${key}`) // 49 bytes: ends with one '='
  t.match(good, /[^=]=$/)
  const cases: Array<{ description: string, header: string, status: number }> = [
    { description: 'canonical', header: `Basic ${good}`, status: 200 },
    { description: 'scheme in any case, several spaces', header: `bAsIc   ${good}`, status: 200 },
    { description: 'trailing junk after the base64', header: `Basic ${good}!!!`, status: 401 },
    { description: 'a second token after a space', header: `Basic ${good} x`, status: 401 },
    { description: 'padding left out', header: `Basic ${good.replace(/=+$/, '')}`, status: 401 },
    { description: 'padding doubled', header: `Basic ${good}=`, status: 401 },
    { description: 'padding in the middle', header: `Basic ${good.slice(0, 8)}=${good.slice(8)}`, status: 401 },
    { description: 'a space inside', header: `Basic ${good.slice(0, 8)} ${good.slice(8)}`, status: 401 },
    { description: 'base64url alphabet', header: `Basic ${b64(`api:${key}?>`).replace(/\+/g, '-').replace(/\//g, '_')}`, status: 401 },
    { description: 'junk before', header: `Basic !${good}`, status: 401 },
    { description: 'not base64 at all', header: 'Basic ~~~~', status: 401 },
    { description: 'empty', header: 'Basic ', status: 401 },
  ]
  // The base64url case must hold a character that differs between the alphabets to mean anything.
  t.match(b64(`api:${key}?>`), /[+/]/)
  for (const c of cases) {
    const r = await feed(c.header)
    t.equal(r.status, c.status, c.description)
    if (c.status === 401) t.same(await r.json(), { success: false, error: 'invalid or missing API key', details: {} }, `${c.description}: body`)
    else await r.arrayBuffer()
  }
})

t.test('spellings of one key do not grow the authentication cache', async (t) => {
  const read = srv.keys.read
  t.equal((await feed(`Bearer ${read}`)).status, 200)
  const write = srv.keys.write
  const post = (authorization: string) => fetch(`${srv.url}/v1/signal`, { method: 'POST', headers: { Authorization: authorization, 'Content-Type': 'application/json' }, body: '[]' })
  t.equal((await post(`Bearer ${write}`)).status, 400, 'past authentication: the empty batch is refused')
  const settled = await cacheBytes()
  t.ok(settled > 0 && settled < 1024, `two keys cached in ${settled} bytes`)

  const spellings: string[] = []
  for (let n = 1; n <= 1500; n++) spellings.push(`Bearer${' '.repeat(n)}${read}`)
  for (const scheme of ['bearer', 'BEARER', 'BeArEr']) spellings.push(`${scheme} ${read}`)
  for (let n = 1; n <= 200; n++) spellings.push(`Basic${' '.repeat(n)}${b64(`api:${read}`)}`)
  for (const spelling of spellings) {
    const r = await feed(spelling)
    if (r.status !== 200) t.fail(`${JSON.stringify(spelling.slice(0, 12))}…: ${r.status}`)
    await r.arrayBuffer()
  }
  for (let n = 1; n <= 200; n++) {
    const r = await post(`${n % 2 === 0 ? 'Bearer' : 'bearer'}${' '.repeat(n)}${write}`)
    if (r.status !== 400) t.fail(`signal spelling ${n}: ${r.status}`)
    await r.arrayBuffer()
  }
  t.equal(await cacheBytes(), settled, `${spellings.length + 200} spellings later, the cache holds the same bytes`)
})
