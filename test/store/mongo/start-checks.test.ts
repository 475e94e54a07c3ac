/**
 * Issue 33, item 9: what a MongoDB node checks at start.
 * - Indexes: only the missing ones are created (every start rebuilt the list, and a future change
 *   of a definition — same name, other key or options — made createIndexes fail with
 *   IndexOptionsConflict / IndexKeySpecsConflict, crash-looping every node). A changed one is
 *   reported, with what to do, and the node starts.
 * - A direct connection (directConnection=true) to a member that is not the primary is refused,
 *   naming the setting: every write would fail, and it cannot follow a failover.
 * The collection fake answers as the server does (listIndexes with `v` and `key`; createIndexes
 * refusing a name taken by another definition with code 85 and a key indexed under another name
 * with code 86).
 */
import t from 'tap'
import { MongoServerError, type IndexDescription } from 'mongodb'
import { ensureIndexes } from '../../../src/store/mongo/collections.js'
import { checkHello } from '../../../src/store/mongo/mongo-store.js'

interface Existing { name: string, key: Record<string, number>, unique?: boolean, sparse?: boolean, expireAfterSeconds?: number }

function fakeCollection (existing: Existing[]) {
  const created: string[] = []
  const indexes = [{ v: 2, key: { _id: 1 }, name: '_id_' }, ...existing.map((e) => ({ v: 2, ...e }))]
  const collection = {
    collectionName: 'access_rules',
    listIndexes: () => ({ toArray: async () => structuredClone(indexes) }),
    async createIndexes (wanted: IndexDescription[]) {
      for (const w of wanted) {
        const same = indexes.find((i) => i.name === w.name)
        const sameKey = indexes.find((i) => JSON.stringify(i.key) === JSON.stringify(w.key))
        if (same !== undefined && (JSON.stringify(same.key) !== JSON.stringify(w.key) || (same.unique ?? false) !== (w.unique ?? false))) {
          throw new MongoServerError({ message: `An existing index has the same name as the requested index. Requested index: ${JSON.stringify(w)}`, code: 86, codeName: 'IndexKeySpecsConflict' })
        }
        if (same === undefined && sameKey !== undefined) {
          throw new MongoServerError({ message: `Index already exists with a different name: ${sameKey.name}`, code: 85, codeName: 'IndexOptionsConflict' })
        }
        if (same === undefined) {
          indexes.push({ v: 2, key: w.key as Record<string, number>, name: w.name! })
          created.push(w.name!)
        }
      }
      return wanted.map((w) => w.name!)
    },
  }
  return { collection, created }
}

const WANTED: IndexDescription[] = [
  { key: { workspaceId: 1, identity: 1 }, name: 'identity_unique', unique: true },
  { key: { workspaceId: 1, seq: 1 }, name: 'workspace_seq' },
  { key: { fetchedAt: 1 }, name: 'fetched_at', sparse: true },
]

t.test('indexes: only the missing are created; a changed definition is reported with what to do, and start goes on', async (t) => {
  const cases: Array<{ description: string, existing: Existing[], created: string[], reported: RegExp[] }> = [
    { description: 'an empty collection: all created', existing: [], created: ['identity_unique', 'workspace_seq', 'fetched_at'], reported: [] },
    {
      description: 'all there: none created',
      existing: [{ name: 'identity_unique', key: { workspaceId: 1, identity: 1 }, unique: true }, { name: 'workspace_seq', key: { workspaceId: 1, seq: 1 } }, { name: 'fetched_at', key: { fetchedAt: 1 }, sparse: true }],
      created: [],
      reported: [],
    },
    {
      description: 'one missing: it alone',
      existing: [{ name: 'identity_unique', key: { workspaceId: 1, identity: 1 }, unique: true }, { name: 'fetched_at', key: { fetchedAt: 1 }, sparse: true }],
      created: ['workspace_seq'],
      reported: [],
    },
    {
      description: 'a name with another key (a definition changed): reported, the others created',
      existing: [{ name: 'workspace_seq', key: { workspaceId: 1, seq: -1 } }],
      created: ['identity_unique', 'fetched_at'],
      reported: [/access_rules\.workspace_seq.*\{"workspaceId":1,"seq":-1\}.*\{"workspaceId":1,"seq":1\}.*dropIndex\("workspace_seq"\)/],
    },
    {
      description: 'a name with other options (unique dropped): reported',
      existing: [{ name: 'identity_unique', key: { workspaceId: 1, identity: 1 } }],
      created: ['workspace_seq', 'fetched_at'],
      reported: [/access_rules\.identity_unique.*unique.*dropIndex\("identity_unique"\)/],
    },
    {
      description: 'the key indexed under another name: reported',
      existing: [{ name: 'by_seq', key: { workspaceId: 1, seq: 1 } }],
      created: ['identity_unique', 'fetched_at'],
      reported: [/access_rules\.workspace_seq.*by_seq.*dropIndex\("by_seq"\)/],
    },
  ]
  for (const c of cases) {
    const { collection, created } = fakeCollection(c.existing)
    const reported = await ensureIndexes(collection as never, WANTED)
    t.same(created, c.created, `${c.description}: created`)
    t.equal(reported.length, c.reported.length, `${c.description}: reported ${JSON.stringify(reported)}`)
    c.reported.forEach((re, i) => t.match(reported[i], re, `${c.description}: says what and what to do`))
  }
})

t.test('a direct connection to a member that is not the primary is refused at start, naming the setting', async (t) => {
  const cases: Array<{ description: string, hello: Record<string, unknown>, direct: boolean, expected: RegExp | null }> = [
    { description: 'the set, through its primary', hello: { setName: 'rs0', isWritablePrimary: true }, direct: false, expected: null },
    { description: 'a direct connection to the primary', hello: { setName: 'rs0', isWritablePrimary: true }, direct: true, expected: null },
    { description: 'a direct connection to a secondary', hello: { setName: 'rs0', isWritablePrimary: false, secondary: true }, direct: true, expected: /directConnection=true.*not the primary.*replicaSet=/ },
    { description: 'a direct connection to an arbiter', hello: { setName: 'rs0', isWritablePrimary: false, arbiterOnly: true }, direct: true, expected: /directConnection=true/ },
    { description: 'a standalone server', hello: { isWritablePrimary: true }, direct: true, expected: /must be a replica set/ },
    { description: 'mongos', hello: { msg: 'isdbgrid', isWritablePrimary: true }, direct: false, expected: null },
  ]
  for (const c of cases) {
    let error: unknown = null
    try {
      checkHello(c.hello, c.direct)
    } catch (e) {
      error = e
    }
    if (c.expected === null) t.equal(error, null, c.description)
    else t.match(error, { code: 'TF_ERR_CONFIG', message: c.expected }, c.description)
  }
})
