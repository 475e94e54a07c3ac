/**
 * FeedVersionStore#saveServed / loadServed / listServed (issue 35, item 5: src/feed/served-copy.ts):
 * the bytes of a feed's last published version, per feed, replaced whole, listed without them,
 * forgotten on null. `checkServedCopies` is also run on MongoDB through a fake of the driver
 * (test/store/mongo/served-parts.test.ts), where a copy is kept in parts under 16 MiB.
 */
import type { Test } from 'tap'
import type { FeedVersionStore } from '../../src/store/types.js'
import type { StoreTest } from './contract.js'

/** Bytes that differ at every offset of a part: a part dropped, repeated or reordered shows. */
export function servedBytes (n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n)
  for (let i = 0; i < n; i++) out[i] = ((i * 7919) + seed + (i >>> 16)) & 255
  return out
}

export async function checkServedCopies (t: Test, store: Required<Pick<FeedVersionStore, 'saveServed' | 'loadServed' | 'listServed'>>, workspaceId: string, big: number): Promise<void> {
  const list = { workspaceId, listId: '00000000-0000-4000-8000-000000000001' }
  const wsFeed = { workspaceId, listId: '*' }
  t.equal(await store.loadServed(list), null, 'nothing before a save')
  t.same(await store.listServed(), [], 'nothing listed')
  const first = servedBytes(big, 1)
  await store.saveServed(list, { bytes: first, savedAt: 1000 })
  await store.saveServed(wsFeed, { bytes: servedBytes(10, 2), savedAt: 2000 })
  const back = await store.loadServed(list)
  t.equal(back?.savedAt, 1000, 'its save time')
  t.ok(back !== null && Buffer.from(back.bytes).equals(Buffer.from(first)), `the ${big} bytes as saved`)
  const listed = (await store.listServed()).sort((a, b) => a.savedAt - b.savedAt)
  t.same(listed, [{ ...list, bytes: big, savedAt: 1000 }, { ...wsFeed, bytes: 10, savedAt: 2000 }], 'listed with sizes and times')

  const smaller = servedBytes(100, 3)
  await store.saveServed(list, { bytes: smaller, savedAt: 3000 })
  const replaced = await store.loadServed(list)
  t.ok(replaced !== null && Buffer.from(replaced.bytes).equals(Buffer.from(smaller)) && replaced.savedAt === 3000, 'replaced whole by a smaller copy')
  await store.saveServed(list, null)
  t.equal(await store.loadServed(list), null, 'forgotten')
  t.same((await store.listServed()).map((e) => e.listId), ['*'], 'the other feed keeps its copy')
}

export function describeServedContract (test: StoreTest): void {
  test('served copies: kept per feed as given, listed without their bytes, replaced, forgotten on null', async (t, store) => {
    const fv = store.feedVersions
    if (fv.saveServed === undefined || fv.loadServed === undefined || fv.listServed === undefined) throw new Error('the store keeps no served copies')
    const ws = (await store.workspaces.create({ name: 'w', subscription: 'active' })).id
    await checkServedCopies(t, { saveServed: fv.saveServed.bind(fv), loadServed: fv.loadServed.bind(fv), listServed: fv.listServed.bind(fv) }, ws, 3 * 1024 * 1024 + 17)
  })
}
