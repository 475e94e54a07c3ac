/**
 * `{list}` resolution (SPEC §4.4, DECISIONS §2, §4): UUID or name, 404 for unknown lists and for
 * other workspaces' lists, 409 for an ambiguous name; the directory follows the admin revision.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { ThreatfeedError } from '../../src/errors.js'
import { decodeListRef, indexLists, ListDirectory, resolveList } from '../../src/http/list-resolve.js'
import type { AccessList } from '../../src/store/types.js'

const WS_A = randomUUID()
const WS_B = randomUUID()

function list (workspaceId: string, name: string): AccessList {
  return { id: randomUUID(), workspaceId, name, description: '', defaults: {}, selector: {}, createdAt: 0, updatedAt: 0 }
}

const tor = list(WS_A, 'tor-exits')
const dupe1 = list(WS_A, 'scanners')
const dupe2 = list(WS_A, 'scanners')
const other = list(WS_B, 'tor-exits')
const otherOnly = list(WS_B, 'b-only')
// A list whose name is another list's UUID: the UUID wins.
const trick = list(WS_A, tor.id)
const spaced = list(WS_A, 'bad guys/2')
const index = indexLists([tor, dupe1, dupe2, other, otherOnly, trick, spaced])

function outcome (workspaceId: string, ref: string): string {
  try {
    return resolveList(index, workspaceId, ref).id
  } catch (e) {
    if (e instanceof ThreatfeedError) return `${e.status} ${e.code}`
    throw e
  }
}

t.test('resolution table', async (t) => {
  const cases: Array<{ description: string, workspace: string, ref: string, expected: string }> = [
    { description: 'by UUID', workspace: WS_A, ref: tor.id, expected: tor.id },
    { description: 'by UUID in capitals', workspace: WS_A, ref: tor.id.toUpperCase(), expected: tor.id },
    { description: 'by name', workspace: WS_A, ref: 'tor-exits', expected: tor.id },
    { description: 'same name in the other workspace resolves there', workspace: WS_B, ref: 'tor-exits', expected: other.id },
    { description: 'name with a space and a slash', workspace: WS_A, ref: 'bad guys/2', expected: spaced.id },
    { description: 'ambiguous name', workspace: WS_A, ref: 'scanners', expected: '409 TF_ERR_LIST_AMBIGUOUS' },
    { description: 'each duplicate by UUID', workspace: WS_A, ref: dupe2.id, expected: dupe2.id },
    { description: 'unknown name', workspace: WS_A, ref: 'nope', expected: '404 TF_ERR_LIST_NOT_FOUND' },
    { description: 'unknown UUID', workspace: WS_A, ref: randomUUID(), expected: '404 TF_ERR_LIST_NOT_FOUND' },
    { description: "another workspace's list by UUID", workspace: WS_A, ref: other.id, expected: '404 TF_ERR_LIST_NOT_FOUND' },
    { description: "another workspace's list by name", workspace: WS_A, ref: 'b-only', expected: '404 TF_ERR_LIST_NOT_FOUND' },
    { description: 'workspace without lists', workspace: randomUUID(), ref: 'tor-exits', expected: '404 TF_ERR_LIST_NOT_FOUND' },
    { description: 'names are case-sensitive', workspace: WS_A, ref: 'TOR-EXITS', expected: '404 TF_ERR_LIST_NOT_FOUND' },
  ]
  for (const c of cases) t.equal(outcome(c.workspace, c.ref), c.expected, c.description)
})

t.test('409 details name the ambiguity', async (t) => {
  const e = (() => { try { resolveList(index, WS_A, 'scanners') } catch (e) { return e as ThreatfeedError } })()
  t.equal(e?.code, 'TF_ERR_LIST_AMBIGUOUS')
  t.same(e?.details, { name: 'scanners', matches: 2 })
})

t.test('path segment decoding', async (t) => {
  const cases: Array<{ input: string, expected: string | null }> = [
    { input: 'tor-exits', expected: 'tor-exits' },
    { input: 'bad%20guys%2F2', expected: 'bad guys/2' },
    { input: 'caf%C3%A9', expected: 'café' },
    { input: 'a+b', expected: 'a+b' },
    { input: '%E0%A4%A', expected: null },
  ]
  for (const c of cases) t.equal(decodeListRef(c.input), c.expected, c.input)
})

/** A store double exposing only what the catalog reads: lists, no keys or workspaces, and the admin revision. */
function fakeStore (initial: AccessList[]): { lists: { list: () => Promise<AccessList[]> }, keys: { list: () => Promise<[]> }, workspaces: { list: () => Promise<[]> }, revisions: () => Promise<{ admin: number, rules: number }>, set: (l: AccessList[]) => void, loads: number, fail: boolean } {
  let current = initial
  let admin = 1
  const store = {
    loads: 0,
    fail: false,
    lists: {
      list: async () => {
        store.loads++
        return current
      },
    },
    keys: { list: async (): Promise<[]> => [] },
    workspaces: { list: async (): Promise<[]> => [] },
    revisions: async () => {
      if (store.fail) throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE')
      return { admin, rules: 0 }
    },
    set: (l: AccessList[]) => { current = l; admin++ },
  }
  return store
}

t.test('directory: loads once, reloads only when the admin revision moves, survives outages', async (t) => {
  const store = fakeStore([tor])
  // Cast: the catalog reads only the list() of lists, keys and workspaces, and revisions().
  const dir = new ListDirectory(store as never, { pollMs: 10_000 })
  t.notOk(dir.loaded)
  t.throws(() => dir.resolve(WS_A, 'tor-exits'), { code: 'TF_ERR_FEED_UNAVAILABLE' })
  await dir.start()
  t.teardown(() => dir.stop())
  t.ok(dir.loaded)
  t.equal(dir.resolve(WS_A, 'tor-exits').id, tor.id)
  await dir.refresh()
  await dir.refresh()
  t.equal(store.loads, 1, 'unchanged revision: no reload')

  const renamed = { ...tor, name: 'tor' }
  store.set([renamed])
  await dir.refresh()
  t.equal(store.loads, 2)
  t.equal(dir.resolve(WS_A, 'tor').id, tor.id)
  t.throws(() => dir.resolve(WS_A, 'tor-exits'), { code: 'TF_ERR_LIST_NOT_FOUND' })

  store.fail = true
  await t.rejects(dir.refresh(), { code: 'TF_ERR_STORE_UNAVAILABLE' })
  t.equal(dir.resolve(WS_A, 'tor').id, tor.id, 'the last index keeps answering during an outage')
})

t.test('directory: concurrent refreshes share one load, and the poll picks up changes', async (t) => {
  const store = fakeStore([])
  const dir = new ListDirectory(store as never, { pollMs: 20 })
  await Promise.all([dir.start(), dir.refresh(), dir.refresh()])
  t.teardown(() => dir.stop())
  t.equal(store.loads, 1)
  store.set([dupe1])
  const deadline = Date.now() + 2000
  while (Date.now() < deadline) {
    try {
      dir.resolve(WS_A, 'scanners')
      break
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
  t.equal(dir.resolve(WS_A, 'scanners').id, dupe1.id)
})
