/**
 * Every acknowledged signal batch names itself (issue 35): its 200/206 answer carries a receipt —
 * a batch id and the stream positions its accepted entries took — and the stream records at
 * those positions carry the same id, as `threatfeed stream tail --json` shows them. v1 and v2,
 * 200 and 206, through a real server with front-end threads.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { streamCommand } from '../../src/cli/stream.js'
import { runCommand } from '../helpers/cli.js'
import { startRealServer } from '../helpers/real-server.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-receipt-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const srv = await startRealServer(dir, { THREATFEED_HTTP_THREADS: '2' })
t.teardown(() => srv.server.stop())

const block = (ip: string): unknown => ({ type: 'access_rules', action: 'block', ip })
const v2block = (ip: string): unknown => ({ kind: 'access_rule', op: 'upsert', rule: { target: { ip } } })
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

async function post (api: 'v1' | 'v2', entries: unknown[]): Promise<{ status: number, body: { batch?: { id: string, first_seq: number, last_seq: number } } }> {
  const r = await fetch(`${srv.base}/${api}/signal`, { method: 'POST', headers: { authorization: `Bearer ${srv.key}`, 'content-type': 'application/json' }, body: JSON.stringify(entries) })
  return { status: r.status, body: await r.json() as never }
}

t.test('each 200/206 answer names its batch and where its entries are; the stream records carry the id', async (t) => {
  const cases = [
    { description: 'v1, every entry accepted (stored whole)', api: 'v1', entries: [block('192.0.2.1'), block('192.0.2.2'), block('192.0.2.3')], status: 200, accepted: ['192.0.2.1', '192.0.2.2', '192.0.2.3'] },
    { description: 'v1, one entry failed', api: 'v1', entries: [block('192.0.2.4'), block('not an address'), block('192.0.2.5')], status: 206, accepted: ['192.0.2.4', '192.0.2.5'] },
    { description: 'v2, every entry accepted', api: 'v2', entries: [v2block('192.0.2.6'), v2block('192.0.2.7')], status: 200, accepted: ['192.0.2.6', '192.0.2.7'] },
    { description: 'v2, one entry failed', api: 'v2', entries: [v2block('bad'), v2block('192.0.2.8')], status: 206, accepted: ['192.0.2.8'] },
  ] as const
  const receipts: Array<{ id: string, first_seq: number, last_seq: number }> = []
  let next = 1
  for (const c of cases) {
    const r = await post(c.api, [...c.entries])
    t.equal(r.status, c.status, c.description)
    const batch = r.body.batch
    if (batch === undefined) {
      t.fail(`${c.description}: no batch receipt`)
      continue
    }
    t.match(batch.id, UUID, `${c.description}: a UUID`)
    t.same([batch.first_seq, batch.last_seq], [next, next + c.accepted.length - 1], `${c.description}: the positions of the accepted entries only`)
    next += c.accepted.length
    receipts.push(batch)
  }
  t.equal(new Set(receipts.map((b) => b.id)).size, receipts.length, 'ids are distinct')

  const tail = await runCommand(streamCommand, ['tail', '--from', '1', '--json'], { env: { THREATFEED_DATA_DIR: dir } })
  t.equal(tail.code, 0, tail.stderr)
  const records = JSON.parse(tail.stdout) as Array<{ seq: number, batch?: string, payload: string }>
  for (const [i, b] of receipts.entries()) {
    const mine = records.filter((r) => r.seq >= b.first_seq && r.seq <= b.last_seq)
    t.same(mine.map((r) => r.batch), mine.map(() => b.id), `${cases[i]!.description}: stream tail shows the id on each of its records`)
    t.same(mine.map((r) => /192\.0\.2\.\d+/.exec(r.payload)?.[0]), cases[i]!.accepted, `${cases[i]!.description}: and they hold its accepted entries`)
  }
})
