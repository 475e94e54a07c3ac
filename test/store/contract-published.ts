/**
 * FeedVersionStore#savePublished / loadPublished (issue 21, src/feed/guards-persist.ts): what a
 * guarded feed last published and its publish state, per feed, kept as given and forgotten on null.
 */
import type { PublishedRecord } from '../../src/store/types.js'
import type { StoreTest } from './contract.js'

export function describePublishedContract (test: StoreTest): void {
  test('published rules: kept per feed as given, replaced, forgotten on null', async (t, store) => {
    const ws = (await store.workspaces.create({ name: 'w', subscription: 'active' })).id
    const list = { workspaceId: ws, listId: '00000000-0000-4000-8000-000000000001' }
    const wsFeed = { workspaceId: ws, listId: '*' }
    t.equal(await store.feedVersions.loadPublished(list), null, 'nothing before a save')
    const rules = Uint8Array.from({ length: 70_000 }, (_, i) => (i * 31) & 255)
    const held: PublishedRecord = {
      state: {
        held: { digest: 'd1', guards: { block: 'max-grow-pct' }, since: 1000, diff: { block: { published: 1, held: 2, added: 1, removed: 0, addedSample: ['192.0.2.1/32'], removedSample: [] }, allow: { published: 0, held: 0, added: 0, removed: 0, addedSample: [], removedSample: [] } } },
        publishedDigest: 'd0',
      },
      rules,
      savedAt: 1234,
    }
    await store.feedVersions.savePublished(list, held)
    const back = await store.feedVersions.loadPublished(list)
    t.same(back?.state, held.state, 'the state as saved')
    t.equal(back?.savedAt, 1234)
    t.same(Buffer.from(back!.rules!), Buffer.from(rules), 'the rule bytes as saved')
    t.equal(await store.feedVersions.loadPublished(wsFeed), null, 'another feed of the workspace has none')
    t.same(await store.feedVersions.fetchedSince(0), [], 'no feed counts as fetched')

    await store.feedVersions.savePublished(wsFeed, { state: { held: null, publishedDigest: 'w1' }, rules: null, savedAt: 5 })
    await store.feedVersions.savePublished(list, { state: { held: null, publishedDigest: 'd1' }, rules: Uint8Array.of(1, 2, 3), savedAt: 6 })
    t.same(await store.feedVersions.loadPublished(list), { state: { held: null, publishedDigest: 'd1' }, rules: Uint8Array.of(1, 2, 3), savedAt: 6 }, 'replaced')
    t.same(await store.feedVersions.loadPublished(wsFeed), { state: { held: null, publishedDigest: 'w1' }, rules: null, savedAt: 5 }, 'no rules kept as none')
    await store.feedVersions.savePublished(list, null)
    t.equal(await store.feedVersions.loadPublished(list), null, 'forgotten')
    t.not(await store.feedVersions.loadPublished(wsFeed), null, 'the other feed keeps its record')
  })
}
