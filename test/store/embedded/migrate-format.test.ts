/**
 * A data directory written by the previous version (format 1) opens with everything in it: the
 * stream record for record (v1 records without schemaVersion), the access rules field for field,
 * the expiry of every rule (purged on time through the rebuilt log). A directory of a newer format
 * is refused. The format-1 directory is written here the way that version wrote it.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { open } from 'lmdb'
import t from 'tap'
import { ByteWriter } from '../../../src/store/embedded/byte-writer.js'
import { accessRuleKey, expressionRuleKey } from '../../../src/store/embedded/key-layout.js'
import { encodeChunk } from '../../../src/store/embedded/stream-codec.js'
import { openStore } from '../../../src/store/open.js'
import type { AccessRule, ExpressionRule, StreamRecord } from '../../../src/store/types.js'
import { accessInput, expressionInput, freshWorkspaceId } from '../contract-fixtures.js'

const HOUR = 3_600_000

function accessRule (ws: string, i: number): AccessRule {
  return {
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, workspaceId: ws, kind: 'access_rule', ruleRef: i % 3 === 0 ? `r${i}` : null,
    target: { type: 'ip', value: `192.0.2.${i}/32` }, action: i % 2 === 0 ? 'block' : 'allow', name: i % 5 === 0 ? `name ${i}` : null,
    confidence: i % 4 === 0 ? 'high' : null, severity: null, labels: i % 2 === 0 ? { source: 'ids', n: i } : {}, reason: 'why',
    expiresAt: i % 2 === 0 ? (i + 1) * HOUR : null, createdAt: 1000 + i, updatedAt: 2000 + i, seq: i,
  }
}

t.test('a format-1 directory opens with its stream, rules and expiries', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-format1-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const ws = freshWorkspaceId()
  const records: StreamRecord[] = Array.from({ length: 2500 }, (_, i) => i % 2 === 0
    ? { seq: i + 1, workspaceId: ws, payload: `{"type":"access_rules","action":"block","ip":"10.0.${i >> 8}.${i & 255}"}`, acceptedAt: 5000 + i }
    : { seq: i + 1, workspaceId: ws, schemaVersion: 2, payload: `{"n":${i},"quote":"\\""}`, acceptedAt: 5000 + i })
  const rules = Array.from({ length: 20 }, (_, i) => accessRule(ws, i))
  const waf: ExpressionRule = { ...expressionInput(ws, { ruleRef: 'w', expiresAt: 3 * HOUR }), id: 'e', createdAt: 1, updatedAt: 2 }

  const old = open({ path: dir, noSubdir: false, maxDbs: 16, overlappingSync: false })
  const json = { encoding: 'json' } as const
  await old.transaction(() => {
    const stream = old.openDB('stream', json)
    for (const r of records) stream.put(r.seq, [r.workspaceId, r.acceptedAt, r.schemaVersion ?? null, r.payload])
    const access = old.openDB('access-rules', json)
    const expiry = old.openDB('rules-by-expiry', { encoding: 'string' })
    for (const r of rules) {
      const pk = accessRuleKey(ws, r.ruleRef, r.target)
      access.put(pk, r)
      if (r.expiresAt !== null) expiry.put([Math.floor(r.expiresAt / HOUR), 'a', pk], '')
      if (r.ruleRef !== null) old.openDB('access-by-target', { encoding: 'string' }).put(`${ws}\u001fip\u001f${r.target.value}\u001f${r.ruleRef}`, pk)
    }
    old.openDB('expression-rules', json).put(expressionRuleKey(ws, 'waf_rule', 'w'), waf)
    const meta = old.openDB('meta', json)
    meta.put('stream:head', records.length)
    meta.put('revision:rules', 7)
    old.openDB('checkpoints', json).put('rules', 1234)
  })
  await old.close()

  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  t.equal(await store.stream.head(), records.length)
  t.strictSame(await store.stream.read(1, 5000), records, 'every record, byte for byte')
  t.strictSame(await store.stream.read(1001, 3), records.slice(1000, 1003), 'read from the middle of a regrouped chunk')
  t.equal(await store.stream.getCheckpoint('rules'), 1234)
  const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : 1)
  t.strictSame((await store.rules.list(ws, 'access_rule')).sort(byId), [...rules].sort(byId), 'every access rule, field for field')
  t.strictSame(await store.rules.list(ws, 'waf_rule'), [waf])
  t.equal((await store.revisions()).rules, 7)

  // Expiries: due rules go, through the log built from the rules.
  t.equal(await store.rules.purgeLapsed(3 * HOUR + 1), 3, 'lapsed by then: access rules 0 (1 h) and 2 (3 h), the WAF rule (3 h)')
  t.equal(await store.rules.purgeLapsed(21 * HOUR), rules.filter((r) => r.expiresAt !== null).length - 2, 'and later every other one')
  t.same((await store.rules.list(ws, 'access_rule')).map((r) => r.expiresAt), rules.filter((r) => r.expiresAt === null).map(() => null))

  // New writes continue the stream after the old records.
  t.same(await store.stream.append([{ workspaceId: ws, payload: 'x', acceptedAt: 1 }]), [records.length + 1])
})

t.test('a format-2 directory moves its stream into the stream environment, once', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-format2-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const ws = freshWorkspaceId()
  const records: StreamRecord[] = Array.from({ length: 2500 }, (_, i) => ({ seq: i + 1, workspaceId: ws, payload: `{"n":${i}}`, acceptedAt: 7000 + i, ...(i % 3 === 0 ? { schemaVersion: 2 } : {}) }))
  const old = open({ path: dir, noSubdir: false, maxDbs: 16, overlappingSync: false })
  await old.transaction(() => {
    const chunks = old.openDB('stream-chunks', { encoding: 'binary' })
    const w = new ByteWriter()
    for (let first = 1; first <= records.length; first += 1000) {
      w.reset()
      encodeChunk(w, records.slice(first - 1, first + 999).map(({ seq: _seq, ...r }) => r))
      chunks.put(first, Buffer.from(w.view()))
    }
    const meta = old.openDB('meta', { encoding: 'json' })
    meta.put('format', 2)
    meta.put('stream:head', records.length)
    old.openDB('checkpoints', { encoding: 'json' }).put('rules', 1500)
  })
  await old.close()

  for (const round of ['first open', 'second open']) {
    const store = await openStore({ kind: 'embedded', dataDir: dir })
    t.equal(await store.stream.head(), records.length, `${round}: the head`)
    t.strictSame(await store.stream.read(1, 5000), records, `${round}: every record, byte for byte`)
    t.equal(await store.stream.getCheckpoint('rules'), 1500, `${round}: the checkpoint stays with the rules`)
    await store.close()
  }
  const main = open({ path: dir, noSubdir: false, maxDbs: 16, overlappingSync: false })
  t.equal(main.openDB('stream-chunks', { encoding: 'binary' }).getKeysCount(), 0, 'nothing left in the main environment')
  t.equal(main.openDB('meta', { encoding: 'json' }).get('format'), 8, 'and on to format 8 (10-second expiry buckets, arrival order, the change log, tombstones in lapse order)')
  await main.close()
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  t.same(await store.stream.append([{ workspaceId: ws, payload: 'x', acceptedAt: 1 }]), [records.length + 1], 'appends continue after the moved records')
})

t.test('a directory of a newer format is refused, not misread', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-format9-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const future = open({ path: dir, noSubdir: false, maxDbs: 16, overlappingSync: false })
  await future.openDB('meta', { encoding: 'json' }).put('format', 9)
  await future.close()
  await t.rejects(openStore({ kind: 'embedded', dataDir: dir }), { code: 'TF_ERR_STORE_UNAVAILABLE', cause: { message: /format 9/ } })
})

t.test('a format-3 directory rebuilds its expiry log in 10-second buckets: what lapsed is swept, nothing live is lost', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-format3-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const ws = freshWorkspaceId()
  const HOUR = 3_600_000
  const base = 500_000 * HOUR
  const expiries = [base + 60_000, base + 20 * 60_000, base + 50 * 60_000, base + 3 * HOUR]
  const s = await openStore({ kind: 'embedded', dataDir: dir })
  for (const [i, expiresAt] of expiries.entries()) await s.rules.upsertAccessRule(accessInput(ws, { ruleRef: `r${i}`, expiresAt }))
  await s.rules.upsertAccessRule(accessInput(ws, { ruleRef: 'gone', expiresAt: base + 60_000 }))
  await s.rules.deleteByRef(ws, 'access_rule', 'gone')
  await s.close()
  // Written back the way format 3 logged them: one entry per hour bucket, a stale reference too.
  const old = open({ path: dir, noSubdir: false, maxDbs: 16, overlappingSync: false })
  await old.transaction(() => {
    const log = old.openDB('expiry-log', { encoding: 'binary' })
    for (const key of Array.from(log.getKeys({}))) log.remove(key)
    const byHour = new Map<number, string[]>()
    for (const [i, expiresAt] of [...expiries.entries(), [-1, base + 60_000] as const]) {
      const hour = Math.floor(expiresAt / HOUR)
      byHour.set(hour, [...byHour.get(hour) ?? [], `${ws}\u001fr\u001f${i < 0 ? 'gone' : `r${i}`}`])
    }
    let n = 0
    for (const [hour, pks] of byHour) {
      const w = new ByteWriter()
      w.u32(pks.length)
      for (const pk of pks) { w.u8(0); w.str(pk) }
      log.put([hour, n++], Buffer.from(w.view()))
    }
    old.openDB('meta', { encoding: 'json' }).put('format', 3)
  })
  await old.close()

  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  const refs = async (): Promise<string[]> => (await store.rules.list(ws, 'access_rule')).map((r) => r.ruleRef!).sort()
  t.equal((await store.rules.sweepLapsed(base + 30 * 60_000, 1000)).removed, 2, 'half an hour in: the rules of 0:01 and 0:20, not the hour')
  t.same(await refs(), ['r2', 'r3'])
  t.equal((await store.rules.sweepLapsed(base + 4 * HOUR, 1000)).removed, 2, 'and later the rest')
  t.same(await refs(), [])
  t.same((await store.rules.lapsedTombstones(ws, accessInput(ws).target)).map((x) => x.ruleRef), ['r3', 'r2', 'r1', 'r0'], 'a tombstone each, none for the rule deleted before')
})
