/**
 * Content-Digest (RFC 9530 §2, `sha-256`) over real snapshots: on every 200 and HEAD of every
 * variant, identity and gzip each, the digest is that of the bytes as sent (the gzip answer's is
 * of the gzip bytes), and the HEAD answer carries the GET answer's digest.
 */
import t from 'tap'
import { createHash } from 'node:crypto'
import { FeedService } from '../../src/feed/feed-service.js'
import { inProcessTasks } from '../../src/feed/in-process-tasks.js'
import { buildGeoIndex } from '../../src/geo/load.js'
import type { AccessRuleInput } from '../../src/store/types.js'
import { bearer, rawRequest, startFeedServer } from '../helpers/feed-server.js'

const geo = buildGeoIndex({})
let service: FeedService | null = null
const server = await startFeedServer(async (store, ctx) => {
  service = new FeedService({ store, pool: { ...inProcessTasks(geo), setGeo: () => {} }, config: { feedRebuildMs: 0, pollMs: ctx.config.pollMs }, log: ctx.log, geo })
  await service.start()
  return service
})
t.teardown(async () => {
  await service?.stop()
  await server.stop()
})
const ws = server.workspace.id
const rule = (value: string, action: 'block' | 'allow'): AccessRuleInput => ({ kind: 'access_rule', workspaceId: ws, ruleRef: null, labels: {}, reason: null, expiresAt: null, seq: 0, target: { type: 'ip', value }, action, name: null, confidence: null, severity: null })
for (const r of [rule('192.0.2.1/32', 'block'), rule('198.51.100.0/24', 'block'), rule('2001:db8::/32', 'block'), rule('203.0.113.0/24', 'allow')]) await server.store.rules.upsertAccessRule(r)

const sha256 = (b: Buffer): string => `sha-256=:${createHash('sha256').update(b).digest('base64')}:`

t.test('Content-Digest is the sha-256 of the body as sent, identity and gzip, GET and HEAD', async (t) => {
  const queries = ['', 'family=v4', 'format=dialect_a', 'format=dialect_b&family=v6', 'format=nftables&family=v4', 'action=allow', 'checksum=md5', 'format=dialect_a&checksum=md5']
  for (const q of queries) {
    for (const encoding of ['identity', 'gzip']) {
      const headers = { ...bearer(server.key), 'accept-encoding': encoding }
      const get = await rawRequest(server.base, `/v1/threat/feeds?${q}`, { headers })
      t.equal(get.status, 200, `${q} ${encoding}`)
      t.equal(get.headers['content-encoding'], encoding === 'gzip' ? 'gzip' : undefined, `${q} ${encoding}: encoding`)
      t.ok(get.body.length > 0, `${q} ${encoding}: a body`)
      t.equal(get.headers['content-digest'], sha256(get.body), `${q} ${encoding}: digest of the bytes sent`)
      const head = await rawRequest(server.base, `/v1/threat/feeds?${q}`, { method: 'HEAD', headers })
      t.equal(head.status, 200)
      t.equal(head.headers['content-digest'], get.headers['content-digest'], `${q} ${encoding}: HEAD carries the GET digest`)
    }
  }
})

t.test('the identity and gzip digests differ, and a 304 carries none', async (t) => {
  const plain = await rawRequest(server.base, '/v1/threat/feeds', { headers: bearer(server.key) })
  const gz = await rawRequest(server.base, '/v1/threat/feeds', { headers: { ...bearer(server.key), 'accept-encoding': 'gzip' } })
  t.not(plain.headers['content-digest'], gz.headers['content-digest'])
  const again = await rawRequest(server.base, '/v1/threat/feeds', { headers: { ...bearer(server.key), 'if-none-match': plain.headers.etag! } })
  t.equal(again.status, 304)
  t.equal(again.headers['content-digest'], undefined)
})
