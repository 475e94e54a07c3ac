/**
 * Bouncers behind front-end threads (THREATFEED_HTTP_THREADS=2, which leave the public ports to
 * the threads): a pull a thread forwards to the main thread keeps its client's address (the
 * thread resolves it, and the main thread reads it only from its internal listener), so two
 * hosts with one key and one User-Agent have a cursor each. The hosts are loopback addresses
 * (127.0.0.x) the client binds, with no trusted proxy.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startRealServer } from '../helpers/real-server.js'
import { request } from 'node:http'

t.setTimeout(180_000)

t.test('one cursor per host through every thread', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-bouncer-threads-'))
  const s = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '0', THREATFEED_HTTP_THREADS: '2' })
  t.teardown(async () => {
    await s.server.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  await s.postBlocks(['192.0.2.7'])
  const port = Number(new URL(s.base).port)
  const get = (host: string, path: string, headers: Record<string, string>): Promise<{ status: number, body: string }> => new Promise((resolve, reject) => {
    const r = request({ host: '127.0.0.1', port, path, localAddress: host, headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { body += c })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body }) })
    })
    r.on('error', reject)
    r.end()
  })
  const pull = async (host: string, query: string): Promise<{ new: unknown[] | null }> => {
    const r = await get(host, `/v1/decisions/stream?${query}`, { 'x-api-key': s.key, 'user-agent': 'crowdsec-firewall-bouncer/v0.0.31' })
    if (r.status !== 200) throw new Error(`${r.status} ${r.body}`)
    return JSON.parse(r.body) as { new: unknown[] | null }
  }
  for (let i = 0; i < 200 && (await pull('127.0.0.250', 'startup=true')).new === null; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  for (let i = 1; i <= 6; i++) {
    t.equal((await pull(`127.0.0.${i}`, 'startup=true')).new?.length, 1, `host ${i}: startup`)
    t.equal((await pull(`127.0.0.${i}`, '')).new, null, `host ${i}: then idle`)
    // Another host with the same key and User-Agent has no cursor yet: it gets the set.
    t.equal((await pull(`127.0.1.${i}`, '')).new?.length, 1, `host ${i}'s neighbour has its own cursor`)
  }
  // A client cannot claim another address by sending the header itself.
  const forged = await get('127.0.2.1', '/v1/decisions/stream', { 'x-api-key': s.key, 'user-agent': 'crowdsec-firewall-bouncer/v0.0.31', 'x-threatfeed-client-address': '127.0.0.1' })
  t.same((JSON.parse(forged.body) as { new: unknown[] | null }).new?.length, 1, 'a forged address header is not 127.0.0.1\'s cursor')
})
