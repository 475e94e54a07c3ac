/**
 * The key layout against real LMDB ordering: a prefix range holds exactly the keys built from
 * that prefix, for short and long components alike (ordered-binary encodes strings of 64+
 * characters differently, which once broke a U+0000-separated layout).
 */
import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import t from 'tap'
import { ByteWriter } from '../../../src/store/embedded/byte-writer.js'
import { accessRuleKey, listNameKey, listNameRange, targetIndexKey, targetIndexRange, workspaceRange, writeAccessRuleKey } from '../../../src/store/embedded/key-layout.js'
import { LmdbEnv } from '../../../src/store/embedded/lmdb-env.js'

/** List names: free text without control characters (DECISIONS §5), up to 120 characters. */
const nameArb = fc.string({ unit: 'binary', minLength: 0, maxLength: 120 })
  .filter((s) => ![...s].some((ch) => (ch.codePointAt(0) ?? 0) < 0x20 || ch === '\u007f'))
/** rule_ref per SPEC 2.2. */
const refArb = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/)
/** Short and long workspace ids, so bounds and keys fall on both sides of 64 characters. */
const wsArb = fc.oneof(fc.uuid(), fc.stringMatching(/^[a-z0-9]{1,8}$/))

t.test('prefix ranges hold exactly their keys, on LMDB itself', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-keys-'))
  const env = new LmdbEnv(dir)
  t.teardown(async () => {
    await env.close()
    await rm(dir, { recursive: true, force: true })
  })

  await fc.assert(fc.asyncProperty(wsArb, fc.array(fc.tuple(nameArb, fc.uuid()), { minLength: 1, maxLength: 12 }), async (wsBase, lists) => {
    const ws = `${wsBase}-${randomUUID().slice(0, 4)}` // isolates runs in one database
    await env.write((dbs) => { for (const [name, id] of lists) dbs.listsByName.put(listNameKey(ws, name, id), id) })
    env.read((dbs) => {
      for (const [name] of lists) {
        const got = Array.from(dbs.listsByName.getRange(listNameRange(ws, name)), (e) => e.value).sort()
        const want = lists.filter(([n]) => n === name).map(([, id]) => id).sort()
        if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`name ${JSON.stringify(name)}: ${got} != ${want}`)
      }
      const all = Array.from(dbs.listsByName.getRange(workspaceRange(ws))).length
      if (all !== lists.length) throw new Error(`workspace range holds ${all} of ${lists.length}`)
    })
  }), { numRuns: 40 })

  const targetArb = fc.oneof(
    fc.ipV4().map((a) => ({ type: 'ip' as const, value: `${a}/32` })),
    fc.ipV6().map((a) => ({ type: 'ip' as const, value: `${a}/128` })),
    fc.integer({ min: 1, max: 4294967295 }).map((n) => ({ type: 'asn' as const, value: `AS${n}` })),
  )
  await fc.assert(fc.asyncProperty(wsArb, fc.array(fc.tuple(targetArb, refArb), { minLength: 1, maxLength: 12 }), async (wsBase, rules) => {
    const ws = `${wsBase}-${randomUUID().slice(0, 4)}`
    await env.write((dbs) => { for (const [target, ref] of rules) dbs.accessByTarget.put(targetIndexKey(ws, target, ref), ref) })
    env.read((dbs) => {
      for (const [target] of rules) {
        const got = new Set(Array.from(dbs.accessByTarget.getRange(targetIndexRange(ws, target)), (e) => e.value))
        const want = new Set(rules.filter(([x]) => x.type === target.type && x.value === target.value).map(([, ref]) => ref))
        if ([...want].some((r) => !got.has(r)) || got.size !== want.size) throw new Error(`target ${target.value}: ${[...got]} != ${[...want]}`)
      }
    })
  }), { numRuns: 40 })
  t.pass('80 random layouts held')
})

t.test('writeAccessRuleKey writes the UTF-8 bytes of accessRuleKey', async (t) => {
  const targetArb = fc.oneof(
    fc.ipV4().map((a) => ({ type: 'ip' as const, value: `${a}/32` })),
    fc.ipV6().map((a) => ({ type: 'ip' as const, value: `${a}/128` })),
    fc.constantFrom({ type: 'country' as const, value: 'FR' }, { type: 'asn' as const, value: 'AS13335' }),
  )
  const w = new ByteWriter(8)
  fc.assert(fc.property(fc.oneof(wsArb, fc.string({ unit: 'binary', maxLength: 70 })), fc.option(refArb, { nil: null }), targetArb, (ws, ref, target) => {
    w.reset()
    writeAccessRuleKey(w, ws, ref, target)
    return Buffer.from(w.view()).equals(Buffer.from(accessRuleKey(ws, ref, target), 'utf8'))
  }), { numRuns: 300 })
  t.pass('300 random keys agreed')
})

t.test('the access-rules table (UTF-8 key encoder): a workspace range holds exactly its keys', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'threatfeed-keys-'))
  const env = new LmdbEnv(dir)
  t.teardown(async () => {
    await env.close()
    await rm(dir, { recursive: true, force: true })
  })
  const keyArb = fc.tuple(fc.option(refArb, { nil: null }), fc.ipV4())
  await fc.assert(fc.asyncProperty(fc.array(fc.tuple(wsArb, fc.array(keyArb, { minLength: 1, maxLength: 6 })), { minLength: 1, maxLength: 4 }), async (spaces) => {
    const suffix = randomUUID().slice(0, 4)
    const want = new Map<string, Set<string>>()
    await env.write((dbs) => {
      for (const [wsBase, keys] of spaces) {
        const ws = `${wsBase}-${suffix}`
        for (const [ref, a] of keys) {
          const key = accessRuleKey(ws, ref, { type: 'ip', value: `${a}/32` })
          dbs.accessRules.put(key, Buffer.from('v'))
          want.set(ws, (want.get(ws) ?? new Set()).add(key))
        }
      }
    })
    env.read((dbs) => {
      for (const [ws, keys] of want) {
        const got = Array.from(dbs.accessRules.getKeys(workspaceRange(ws)))
        if (got.length !== keys.size || got.some((k) => !keys.has(k))) throw new Error(`workspace ${ws}: ${got} != ${[...keys]}`)
      }
    })
  }), { numRuns: 40 })
  t.pass('40 random layouts held')
})
