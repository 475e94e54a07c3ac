/**
 * Feed deltas across nodes (docs/deltas.md): a delta is a function of the two versions' contents,
 * so two `threatfeed serve` processes on one LMDB store answer byte-identical deltas from the same
 * base; a restarted node, which lost its history, answers the full feed for that base, and deltas
 * again from the first version it served itself.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { post, seedCluster, startNode, stopNode, type Node } from '../helpers/cluster-nodes.js'
import { rawRequest, type RawResponse } from '../helpers/feed-server.js'

t.setTimeout(400_000)
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const VARIANTS = [
  { query: 'format=plain', gzip: false },
  { query: 'format=plain&family=v4', gzip: true },
  { query: 'format=nftables&family=v4', gzip: false },
  { query: 'format=json&shard=1&of=2', gzip: true },
  { query: 'format=ipset&family=v4', gzip: false },
] as const
/** What a delta answer carries that must be the same on every node. */
const SAME = ['etag', 'last-modified', 'content-digest', 'content-encoding', 'x-feed-delta', 'x-feed-delta-base', 'x-feed-delta-removed', 'x-feed-delta-added', 'x-feed-result-digest'] as const

t.test('two nodes answer the same delta bytes; a restarted node answers full, then deltas again', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-delta-cluster-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const fleet = await seedCluster(dir)
  const auth = { authorization: fleet.auth }
  const nodes: Node[] = []
  t.teardown(async () => { await Promise.all(nodes.map((n) => stopNode(n, 'SIGKILL'))) })
  const env = { THREATFEED_FEED_REBUILD_MS: '200', THREATFEED_POLL_MS: '100', THREATFEED_HTTP_THREADS: '1' }
  const a = await startNode(dir, env)
  let b = await startNode(dir, env)
  nodes.push(a, b)

  const feed = (node: Node, query: string, gzip: boolean): Promise<RawResponse> =>
    rawRequest(`http://127.0.0.1:${node.port}`, `/v1/threat/feeds?${query}`, { headers: { ...auth, ...(gzip ? { 'accept-encoding': 'gzip' } : {}) } })
  const block = async (ips: string[]): Promise<void> => {
    const r = await post(a.port, '/v1/signal', auth, ips.map((ip) => ({ type: 'access_rules', action: 'block', ip })))
    if (r.status !== 200) throw new Error(`block: ${r.status}`)
  }
  /** Waits until both nodes serve one new version of every variant; its tags. */
  const converged = async (old: readonly string[]): Promise<string[]> => {
    for (let i = 0; i < 400; i++) {
      const tags = await Promise.all(VARIANTS.map(async (v) => [(await feed(a, v.query, v.gzip)).headers.etag!, (await feed(b, v.query, v.gzip)).headers.etag!]))
      if (tags.every(([x, y], k) => x === y && x !== old[k])) return tags.map(([x]) => x!)
      await sleep(100)
    }
    throw new Error('the nodes did not converge')
  }

  await block(Array.from({ length: 60 }, (_, i) => `45.3.${i}.1`))
  const v0 = await converged([])
  await block(['45.4.0.1', '45.4.0.2', '45.4.1.9'])
  const v1 = await converged(v0)

  const deltas = async (base: readonly string[], node: Node): Promise<RawResponse[]> =>
    Promise.all(VARIANTS.map((v, k) => feed(node, `${v.query}&since=${encodeURIComponent(base[k]!)}`, v.gzip)))
  const fromA = await deltas(v0, a)
  const fromB = await deltas(v0, b)
  for (const [k, v] of VARIANTS.entries()) {
    t.equal(fromA[k]!.headers['x-feed-delta'], 'delta', `${v.query}: A answers a delta`)
    t.ok(fromA[k]!.body.equals(fromB[k]!.body), `${v.query}: the same delta bytes from both nodes`)
    for (const h of SAME) t.equal(fromB[k]!.headers[h], fromA[k]!.headers[h], `${v.query}: ${h}`)
  }

  await stopNode(b)
  b = await startNode(dir, env)
  nodes.push(b)
  const restarted = await deltas(v0, b)
  for (const [k, v] of VARIANTS.entries()) {
    const full = await feed(a, v.query, v.gzip)
    t.equal(restarted[k]!.headers['x-feed-delta'], 'full', `${v.query}: the restarted node answers full for a base it never held`)
    t.ok(restarted[k]!.body.equals(full.body), `${v.query}: the full body`)
  }

  await block(['45.5.0.1', '45.5.7.1'])
  const v2 = await converged(v1)
  t.not(v2[0], v1[0])
  const again = await deltas(v1, b)
  const reference = await deltas(v1, a)
  for (const [k, v] of VARIANTS.entries()) {
    t.equal(again[k]!.headers['x-feed-delta'], 'delta', `${v.query}: deltas again from the version the restarted node served`)
    t.ok(again[k]!.body.equals(reference[k]!.body), `${v.query}: the same bytes as the node that kept its history`)
  }
  const stillFull = await deltas(v0, b)
  t.ok(stillFull.every((r) => r.headers['x-feed-delta'] === 'full'), 'the base it never held is still answered full')
})
