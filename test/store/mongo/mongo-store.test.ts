/** What the MongoDB store does without a server: fail fast, with the right code. */
import t from 'tap'
import { collectionsOf } from '../../../src/store/mongo/collections.js'
import { createClient } from '../../../src/store/mongo/mongo-client.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoStore, openMongoStore } from '../../../src/store/mongo/mongo-store.js'
import { openStore } from '../../../src/store/open.js'
import { accessInput, expressionInput } from '../contract-fixtures.js'

/** Nothing listens on port 1: every connection attempt is refused. */
const NOWHERE = 'mongodb://127.0.0.1:1/?directConnection=true'

t.test('an unreachable server at start is TF_ERR_STORE_UNAVAILABLE within 2 s', async (t) => {
  const started = Date.now()
  await t.rejects(openMongoStore(NOWHERE), { code: 'TF_ERR_STORE_UNAVAILABLE' })
  const elapsed = Date.now() - started
  t.ok(elapsed < 2000, `failed after ${elapsed} ms`)
})

t.test('during an outage every call rejects with TF_ERR_STORE_UNAVAILABLE within 2 s (signals get 500)', async (t) => {
  // A store whose server has gone away: built without the start-up checks, which need one.
  const client = createClient(NOWHERE)
  const store = new MongoStore(new MongoContext(client, collectionsOf(client.db('threatfeed_outage'))))
  t.teardown(() => store.close())
  const ws = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'
  const id = '1e2d3c4b-5a69-4788-9766-554433221100'
  const feed = { workspaceId: ws, listId: '*', family: 'v4' as const, action: 'block' as const }
  const target = { type: 'ip' as const, value: '192.0.2.1/32' }
  // Every method of the contract: each must turn the driver's failure into the registry error.
  const calls: Array<[string, () => Promise<unknown>]> = [
    ['workspaces.create', () => store.workspaces.create({ name: 'x', subscription: 'active' })],
    ['workspaces.get', () => store.workspaces.get(id)],
    ['workspaces.update', () => store.workspaces.update(id, { name: 'y' })],
    ['workspaces.delete', () => store.workspaces.delete(id)],
    ['workspaces.list', () => store.workspaces.list()],
    ['keys.create', () => store.keys.create({ workspaceId: ws, hash: '0'.repeat(64), scopes: ['feeds:read'] })],
    ['keys.getByHash', () => store.keys.getByHash('0'.repeat(64))],
    ['keys.get', () => store.keys.get(id)],
    ['keys.revoke', () => store.keys.revoke(id)],
    ['keys.list', () => store.keys.list(ws)],
    ['lists.create', () => store.lists.create({ workspaceId: ws, name: 'l', description: '', defaults: { family: 'v4', maxEntries: 5 }, selector: { a: 'b' } })],
    ['lists.get', () => store.lists.get(id)],
    ['lists.update', () => store.lists.update(id, { name: 'm', description: 'd', defaults: {}, selector: {} })],
    ['lists.delete', () => store.lists.delete(id)],
    ['lists.list', () => store.lists.list()],
    ['lists.findByName', () => store.lists.findByName(ws, 'l')],
    ['rules.upsertAccessRule', () => store.rules.upsertAccessRule(accessInput(ws))],
    ['rules.upsertExpressionRule', () => store.rules.upsertExpressionRule(expressionInput(ws))],
    ['rules.deleteByRef (access)', () => store.rules.deleteByRef(ws, 'access_rule', 'r')],
    ['rules.deleteByRef (waf)', () => store.rules.deleteByRef(ws, 'waf_rule', 'r')],
    ['rules.deleteAccessByTarget', () => store.rules.deleteAccessByTarget(ws, target)],
    ['rules.list (access)', () => store.rules.list(ws, 'access_rule', 1)],
    ['rules.list (waf)', () => store.rules.list(ws, 'waf_rule')],
    ['rules.listAccessRules', () => store.rules.listAccessRules(ws, 1)],
    ['rules.purgeLapsed', () => store.rules.purgeLapsed(1)],
    ['applyRuleBatch', () => store.applyRuleBatch({
      ops: [
        { op: 'upsertAccessRule', input: accessInput(ws) },
        { op: 'upsertExpressionRule', input: expressionInput(ws) },
        { op: 'deleteByRef', workspaceId: ws, kind: 'access_rule', ruleRef: 'r' },
        { op: 'deleteByRef', workspaceId: ws, kind: 'smart_firewall_rule', ruleRef: 'r' },
        { op: 'deleteAccessByTarget', workspaceId: ws, target },
      ],
      checkpoint: { consumer: 'c', seq: 1 },
    })],
    ['stream.append', () => store.stream.append([{ workspaceId: ws, schemaVersion: 2, payload: '{}', acceptedAt: 1 }])],
    ['stream.read', () => store.stream.read(1, 10)],
    ['stream.head', () => store.stream.head()],
    ['stream.getCheckpoint', () => store.stream.getCheckpoint('c')],
    ['stream.setCheckpoint', () => store.stream.setCheckpoint('c', 1)],
    ['feedVersions.observe', () => store.feedVersions.observe(feed, 'h', 1)],
    ['feedVersions.get', () => store.feedVersions.get(feed)],
    ['feedVersions.recordFetches', () => store.feedVersions.recordFetches([{ workspaceId: ws, listId: '*', at: 1 }])],
    ['feedVersions.fetchedSince', () => store.feedVersions.fetchedSince(0)],
    ['feedVersions.record', () => store.feedVersions.record(feed)],
    ['rules.revisionsOf', () => store.rules.revisionsOf([ws])],
    ['leases.claim', () => store.leases.claim('applier:rules', 'me', 1000)],
    ['leases.release', () => store.leases.release('applier:rules', 'me')],
    ['leases.get', () => store.leases.get('applier:rules')],
    ['revisions', () => store.revisions()],
    ['ping', () => store.ping()],
  ]
  await Promise.all(calls.map(async ([description, call]) => {
    const started = Date.now()
    await t.rejects(call(), { code: 'TF_ERR_STORE_UNAVAILABLE' }, description)
    const elapsed = Date.now() - started
    t.ok(elapsed < 2000, `${description}: failed after ${elapsed} ms`)
  }))
})

t.test('a malformed URI is TF_ERR_CONFIG, not an outage', async (t) => {
  await t.rejects(openStore({ kind: 'mongodb', uri: 'postgres://localhost/x' }), { code: 'TF_ERR_CONFIG' })
})
