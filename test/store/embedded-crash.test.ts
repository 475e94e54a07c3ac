/**
 * The embedded store across processes: a writer SIGKILLed mid-loop loses nothing it
 * acknowledged and leaves no index out of step with its records; and two processes with the
 * environment open see each other's changes within the 1 s of DECISIONS §1.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import type { Test } from 'tap'
import { EXPIRY_TABLE, expiryBucket, listRefs } from '../../src/store/embedded/expiry-log.js'
import { accessRuleKey, arrivalKey, arrivalNumberOfKey, expressionRuleKey, targetIndexKey, workspaceOfKey } from '../../src/store/embedded/key-layout.js'
import { META } from '../../src/store/embedded/layout.js'
import { LmdbEnv } from '../../src/store/embedded/lmdb-env.js'
import { decodeAccessRule } from '../../src/store/embedded/rule-codec.js'
import { readAccessRule } from '../../src/store/embedded/rule-writes.js'
import { chunkCount } from '../../src/store/embedded/stream-codec.js'
import { openStore } from '../../src/store/open.js'
import { WORKSPACE } from '../fixtures/store/crash-plan.js'
import { Child } from './child-process.js'

interface Acked {
  appends: Array<{ first: number, count: number, i: number }>
  rules: number[]
  keys: string[]
  revokes: string[]
}

function record (lines: string[], acked: Acked): void {
  for (const line of lines) {
    const [kind, a = '', b = '', c = ''] = line.split(' ')
    if (kind === 'append') acked.appends.push({ first: Number(a), count: Number(b), i: Number(c) })
    else if (kind === 'rules') acked.rules.push(Number(a))
    else if (kind === 'key') acked.keys.push(a)
    else if (kind === 'revoke') acked.revokes.push(a)
  }
}

/** Every acknowledged write is there, through the public API. */
async function checkAcknowledged (t: Test, dir: string, acked: Acked): Promise<void> {
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  try {
    const head = await store.stream.head()
    const records = await store.stream.read(1, head + 100)
    t.equal(records.length, head, 'one record per seq up to the head')
    t.ok(records.every((r, i) => r.seq === i + 1), 'seqs are contiguous from 1')
    const lost = acked.appends.flatMap((a) => Array.from({ length: a.count }, (_, j) => ({ seq: a.first + j, payload: `{"i":${a.i},"j":${j}}` })))
      .filter((want) => records[want.seq - 1]?.payload !== want.payload)
    t.same(lost, [], `all ${acked.appends.length} acknowledged appends are there, at their seqs`)

    const refs = new Set((await store.rules.list(WORKSPACE, 'access_rule')).map((r) => r.ruleRef))
    t.same(acked.rules.filter((i) => !refs.has(`k${i}`)), [], `all ${acked.rules.length} acknowledged rule batches are there`)
    const lastRules = Math.max(-1, ...acked.rules)
    const lastAppend = acked.appends.find((a) => a.i === lastRules)
    if (lastAppend !== undefined) {
      t.ok(await store.stream.getCheckpoint('crash') >= lastAppend.first + lastAppend.count - 1, 'the checkpoint moved with its batch')
    }
    const missingKeys = []
    for (const hash of acked.keys) if (await store.keys.getByHash(hash) === null) missingKeys.push(hash)
    t.same(missingKeys, [], `all ${acked.keys.length} acknowledged keys are there`)
    const notRevoked = []
    for (const id of acked.revokes) if ((await store.keys.get(id))?.revokedAt == null) notRevoked.push(id)
    t.same(notRevoked, [], `all ${acked.revokes.length} acknowledged revocations are there`)
  } finally {
    await store.close()
  }
}

/**
 * Every index entry matches a record and every record its index entries, in both directions;
 * every rule with an expiry is in the expiry log under its bucket (the log may also hold stale
 * references: it is lazy, see expiry-log.ts); the stream's chunks end at its head.
 */
async function checkIndexes (t: Test, dir: string): Promise<void> {
  const env = new LmdbEnv(dir)
  try {
    const problems = env.read((dbs) => {
      const found: string[] = []
      const expected = new Set<string>()
      // An unkeyed rule is stored under its target or, since format 5, in arrival order: either
      // way one record per target.
      const unkeyed = new Set<string>()
      for (const { key, value } of dbs.accessRules.getRange({})) {
        const rule = decodeAccessRule(value, workspaceOfKey(key))
        const arrival = rule.ruleRef === null && key === arrivalKey(rule.workspaceId, arrivalNumberOfKey(key))
        if (!arrival && key !== accessRuleKey(rule.workspaceId, rule.ruleRef, rule.target)) found.push(`access key ${key}`)
        if (rule.ruleRef === null) {
          const identity = `${rule.workspaceId} ${rule.target.type} ${rule.target.value}`
          if (unkeyed.has(identity)) found.push(`two unkeyed rules of ${identity}`)
          unkeyed.add(identity)
        }
        if (rule.ruleRef !== null && dbs.accessByTarget.get(targetIndexKey(rule.workspaceId, rule.target, rule.ruleRef)) !== key) found.push(`no target entry for ${key}`)
        if (rule.expiresAt !== null) expected.add(JSON.stringify([expiryBucket(rule.expiresAt), EXPIRY_TABLE.access, key]))
      }
      for (const { key, value: pk } of dbs.accessByTarget.getRange({})) {
        const rule = readAccessRule(dbs, pk)
        if (rule?.ruleRef == null || targetIndexKey(rule.workspaceId, rule.target, rule.ruleRef) !== key) found.push(`stray target entry ${key}`)
      }
      for (const { key, value: rule } of dbs.expressionRules.getRange({})) {
        if (key !== expressionRuleKey(rule.workspaceId, rule.kind, rule.ruleRef)) found.push(`expression key ${key}`)
        if (rule.expiresAt !== null) expected.add(JSON.stringify([expiryBucket(rule.expiresAt), EXPIRY_TABLE.expression, key]))
      }
      const logged = new Set(listRefs(dbs).map(({ bucket, ref }) => JSON.stringify([bucket, ref.table, ref.pk])))
      for (const e of expected) if (!logged.has(e)) found.push(`not in the expiry log: ${e}`)
      for (const { key: id, value: k } of dbs.keys.getRange({})) {
        if (dbs.keysByHash.get(k.hash) !== id) found.push(`no hash entry for key ${id}`)
      }
      for (const { key: hash, value: id } of dbs.keysByHash.getRange({})) {
        if (dbs.keys.get(id)?.hash !== hash) found.push(`stray hash entry ${hash}`)
      }
      return found
    })
    problems.push(...env.readStream((dbs) => {
      let lastSeq = 0
      for (const { key, value } of dbs.chunks.getRange({ reverse: true, limit: 1 })) lastSeq = key + chunkCount(value) - 1
      const head = dbs.meta.get(META.streamHead) ?? 0
      return head === lastSeq ? [] : [`stream head ${head} != last seq ${lastSeq}`]
    }))
    t.same(problems, [], 'indexes agree with the records')
  } finally {
    await env.close()
  }
}

t.test('a writer SIGKILLed mid-loop loses no acknowledged write and leaves consistent indexes', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-crash-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const acked: Acked = { appends: [], rules: [], keys: [], revokes: [] }
  let next = 0
  // Two crashes at different points of the loop; the second writer continues the crashed store.
  for (const killAfter of [17, 38]) {
    const child = new Child('write-loop.ts', [dir, String(next)])
    await child.waitForLine((_line) => child.lines.length >= killAfter, 30_000)
    await child.kill('SIGKILL')
    record(child.lines, acked)
    next = Math.max(next, ...acked.rules, ...acked.appends.map((a) => a.i)) + 1
    await t.test(`after a SIGKILL at ~${killAfter} acknowledged writes`, async (t) => {
      await checkAcknowledged(t, dir, acked)
      await checkIndexes(t, dir)
    })
  }
})

t.test('two processes with the environment open see each other\'s changes within 1 s', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-procs-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(() => store.close())
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  const hashA = 'a'.repeat(64)
  const hashB = 'b'.repeat(64)
  const keyA = await store.keys.create({ workspaceId: ws.id, hash: hashA, scopes: ['feeds:read'] })
  const keyB = await store.keys.create({ workspaceId: ws.id, hash: hashB, scopes: ['feeds:read'] })

  await t.test('a watching child sees a revocation made here', async (t) => {
    const watcher = new Child('watch.ts', [dir, hashA])
    t.teardown(() => watcher.kill('SIGTERM'))
    await watcher.waitForLine((l) => l.includes('"revoked":false'), 30_000)
    const startedAt = Date.now()
    t.equal(await store.keys.revoke(keyA.id), true)
    const seen = JSON.parse(await watcher.waitForLine((l) => l.includes('"revoked":true'), 5_000)) as { admin: number }
    const elapsed = Date.now() - startedAt
    t.ok(elapsed < 1000, `seen after ${elapsed} ms`)
    t.equal(seen.admin, (await store.revisions()).admin, 'and the admin revision it saw is the new one')
  })

  await t.test('this process sees a revocation made by a short-lived child (the CLI)', async (t) => {
    const before = await store.revisions()
    const revoker = new Child('revoke.ts', [dir, keyB.id])
    await revoker.waitForLine((l) => l === 'revoked', 30_000)
    const startedAt = Date.now()
    let after = before
    while (after.admin === before.admin && Date.now() - startedAt < 5000) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      after = await store.revisions()
    }
    const elapsed = Date.now() - startedAt
    t.ok(after.admin > before.admin, 'the admin revision rose')
    t.ok(elapsed < 1000, `seen after ${elapsed} ms`)
    t.type((await store.keys.getByHash(hashB))?.revokedAt, 'number', 'and the key reads as revoked')
    t.equal(await revoker.exited, 0)
  })
})
