/**
 * A node hop never costs a download (issue 18): a poller that got the new content from a node that
 * switched, then asks a node that has not switched yet with that tag, gets a 304 — the second node
 * sees in the store that newer content is recorded, builds it at once and answers from it — and
 * never a 304 for content it does not hold.
 *
 * Node B polls the store's revisions once a minute, so it would not switch by itself within the
 * test: the only way it learns of the change is the store's feed-version record.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { get, post, seedCluster, startNode, stopNode, type Answer, type Node } from '../helpers/cluster-nodes.js'

t.setTimeout(180_000)

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const VARIANTS = [
  { path: '/v1/threat/feeds?format=plain&family=both&action=block', headers: {} },
  { path: '/v1/threat/feeds?format=dialect_a&family=v4&action=block', headers: { 'accept-encoding': 'gzip' } },
  { path: '/v1/threat/feeds?format=nftables&family=v4&action=block&checksum=md5', headers: {} },
] as const

t.test('a tag from a node that switched first gets a 304 from one that had not', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-hop-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const fleet = await seedCluster(dir)
  const auth = { authorization: fleet.auth }
  const nodes: Node[] = []
  t.teardown(async () => { await Promise.all(nodes.map((n) => stopNode(n, 'SIGKILL'))) })
  const a = await startNode(dir, { THREATFEED_FEED_REBUILD_MS: '1000', THREATFEED_POLL_MS: '100' })
  nodes.push(a)
  const b = await startNode(dir, { THREATFEED_FEED_REBUILD_MS: '1000', THREATFEED_POLL_MS: '60000' })
  nodes.push(b)
  const block = async (ip: string): Promise<void> => {
    const r = await post(a.port, '/v1/signal', auth, [{ type: 'access_rules', action: 'block', ip }])
    t.equal(r.status, 200, `block ${ip} acknowledged`)
  }

  await block('192.0.2.1')
  // Applied before B's first build (B waits only for what it acknowledged itself).
  await sleep(2000)
  const before: Answer[] = []
  for (const v of VARIANTS) {
    const [x, y] = await Promise.all([get(a.port, v.path, { ...auth, ...v.headers }), get(b.port, v.path, { ...auth, ...v.headers })])
    t.equal(y.etag, x.etag, `${v.path}: both nodes start alike`)
    before.push(x)
  }

  await block('198.51.100.7')
  // A switches at its next boundary; B, polling once a minute, does not.
  const after: Answer[] = []
  for (const [i, v] of VARIANTS.entries()) {
    let x = await get(a.port, v.path, { ...auth, ...v.headers })
    for (let k = 0; k < 200 && x.etag === before[i]!.etag; k++) {
      await sleep(50)
      x = await get(a.port, v.path, { ...auth, ...v.headers })
    }
    t.not(x.etag, before[i]!.etag, `${v.path}: node A switched to the new content`)
    after.push(x)
  }
  const stale = await get(b.port, VARIANTS[0].path, auth)
  t.equal(stale.etag, before[0]!.etag, 'node B has not switched by itself (the precondition of the hop)')

  // The hop: B is asked with the tag A gave.
  for (const [i, v] of VARIANTS.entries()) {
    const r = await get(b.port, v.path, { ...auth, ...v.headers, 'if-none-match': after[i]!.etag! })
    t.equal(r.status, 304, `${v.path}: the tag from node A is a 304 on node B`)
    t.equal(r.etag, after[i]!.etag, `${v.path}: with the same ETag`)
    t.equal(r.lastModified, after[i]!.lastModified, `${v.path}: and the same Last-Modified`)
  }
  // B now serves what A serves, byte for byte.
  for (const [i, v] of VARIANTS.entries()) {
    const r = await get(b.port, v.path, { ...auth, ...v.headers })
    t.same([r.status, r.etag, r.lastModified, r.digest], [200, after[i]!.etag, after[i]!.lastModified, after[i]!.digest], `${v.path}: node B answers A's bytes`)
  }

  // Never a 304 for content the client does not hold.
  const cases: Array<{ name: string, tag: string }> = [
    { name: 'the tag of the content before the change', tag: before[0]!.etag! },
    { name: 'a tag no node ever gave', tag: '"plain.both.block.identity.AAAAAAAAAAAAAAAAAAAAAA"' },
    { name: 'a tag of another variant', tag: after[1]!.etag! },
    { name: 'an unquoted tag', tag: 'garbage' },
  ]
  for (const c of cases) {
    const r = await get(b.port, VARIANTS[0].path, { ...auth, 'if-none-match': c.tag })
    t.same([r.status, r.etag, r.digest], [200, after[0]!.etag, after[0]!.digest], `${c.name}: 200 with the current body`)
  }
})

t.test('the hop holds on every front-end thread of the node that had not switched', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-hop-threads-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const fleet = await seedCluster(dir)
  const auth = { authorization: fleet.auth }
  const nodes: Node[] = []
  t.teardown(async () => { await Promise.all(nodes.map((n) => stopNode(n, 'SIGKILL'))) })
  const a = await startNode(dir, { THREATFEED_FEED_REBUILD_MS: '1000', THREATFEED_POLL_MS: '100', THREATFEED_HTTP_THREADS: '1' })
  nodes.push(a)
  const b = await startNode(dir, { THREATFEED_FEED_REBUILD_MS: '1000', THREATFEED_POLL_MS: '60000', THREATFEED_HTTP_THREADS: '2' })
  nodes.push(b)
  const path = VARIANTS[0].path
  // A new connection per hop: the kernel spreads them over B's two threads, so over the rounds a
  // thread that answered the hop without asking the main thread would give a 200.
  const fresh = { ...auth, connection: 'close' }
  let tag = (await get(a.port, path, auth)).etag
  for (let round = 1; round <= 6; round++) {
    const r = await post(a.port, '/v1/signal', auth, [{ type: 'access_rules', action: 'block', ip: `203.0.113.${round}` }])
    t.equal(r.status, 200, `round ${round}: acknowledged`)
    let x = await get(a.port, path, auth)
    for (let k = 0; k < 200 && x.etag === tag; k++) {
      await sleep(50)
      x = await get(a.port, path, auth)
    }
    t.not(x.etag, tag, `round ${round}: node A switched`)
    tag = x.etag
    const hop = await get(b.port, path, { ...fresh, 'if-none-match': tag! })
    t.same([hop.status, hop.etag], [304, tag], `round ${round}: the tag from node A is a 304 on node B`)
    // B caught up off its boundaries; SPEC §8 lets it build that feed again one interval later.
    await sleep(1200)
  }
})
