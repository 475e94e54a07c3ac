/**
 * A rebuild's rule read on MongoDB (RuleStore#accessRulesChangedSince) lets the HTTP thread
 * answer while it decodes a large workspace (issue 18: "decoded off the HTTP thread when
 * large"; issue 16: "incrementally in slices the event loop can interleave"). No server: the
 * cursor is a fake whose documents have all been received, which is what the driver's cursor is
 * within one batch — taking the next document resolves at once, with no I/O, so only the store's
 * own slicing lets a timer run.
 */
import t from 'tap'
import type { MongoClient } from 'mongodb'
import type { AccessRuleDoc, Collections } from '../../../src/store/mongo/collections.js'
import { MongoContext } from '../../../src/store/mongo/mongo-context.js'
import { MongoStore } from '../../../src/store/mongo/mongo-store.js'

const WS = '0f7c5b8e-9a43-4b7e-8c0d-1d2e3f4a5b6c'

function ruleDoc (i: number): AccessRuleDoc {
  return {
    _id: `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`,
    workspaceId: WS,
    identity: '',
    targetKey: '',
    ruleRef: null,
    target: { type: 'ip', value: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}/32` },
    action: 'block',
    name: null,
    confidence: null,
    severity: null,
    labels: [{ k: 'source', v: 'sensor 7' }],
    reason: null,
    expiresAt: null,
    createdAt: 1,
    updatedAt: 1,
    seq: i + 1,
  }
}

function storeOver (docs: AccessRuleDoc[]) {
  const finds: Array<{ filter: unknown, batchSize: number | null }> = []
  const accessRules = {
    find (filter: { seq?: unknown }) {
      const call = { filter, batchSize: null as number | null }
      finds.push(call)
      const selected = filter.seq === undefined ? docs.slice(-1) : docs
      const cursor = {
        sort () { return cursor },
        limit () { return cursor },
        batchSize (n: number) { call.batchSize = n; return cursor },
        async toArray () { return selected },
        async * [Symbol.asyncIterator] () { yield * selected },
      }
      return cursor
    },
    async countDocuments () { return docs.length },
  }
  const client = { startSession: () => { throw new Error('no transaction expected') } } as unknown as MongoClient
  // No delete ever: the removals count is absent (0).
  const meta = { async findOne () { return null } }
  const c = { accessRules, meta } as unknown as Collections
  return { store: new MongoStore(new MongoContext(client, c)), finds }
}

t.test('a reload of 100,000 rules hands them over in short slices with turns of the event loop between', async (t) => {
  const N = 100_000
  const docs = Array.from({ length: N }, (_, i) => ruleDoc(i))
  const { store, finds } = storeOver(docs)
  // Rules handed over between two turns of the event loop (a poll waiting on the HTTP thread
  // waits for one such run). Counted, not timed: on a loaded machine a slice can be descheduled.
  let turns = 0
  let run = 0
  let longestRun = 0
  let reading = true
  const tick = (): void => {
    turns++
    run = 0
    if (reading) setImmediate(tick)
  }
  setImmediate(tick)
  let seen = 0
  const started = performance.now()
  const result = await store.rules.accessRulesChangedSince(WS, 0, 1000, () => {
    seen++
    longestRun = Math.max(longestRun, ++run)
  })
  const ms = performance.now() - started
  reading = false
  t.same(result, { changed: N, live: N, seq: N, removals: 0 })
  t.equal(seen, N, 'every rule handed over')
  t.ok(turns > 10, `the event loop turned ${turns} times during the ${ms.toFixed(0)} ms read`)
  // About 0.5 ms of decoding a slice: hundreds of rules, never a tenth of the workspace.
  t.ok(longestRun <= N / 10, `at most ${longestRun} rules between two turns`)
  const read = finds.find((f) => (f.filter as { seq?: unknown }).seq !== undefined)
  t.ok(read?.batchSize !== null && read!.batchSize! <= 10_000, `round trips of a bounded number of documents (${read?.batchSize})`)
})
