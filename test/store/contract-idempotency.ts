/** Store contract: SignalStream#appendOnce, the store side of the Idempotency-Key header (issue 33). */
import { IDEMPOTENCY_WINDOW_MS, type AppendOnce, type StreamRecordInput } from '../../src/store/types.js'
import type { StoreTest } from './contract.js'
import { freshWorkspaceId } from './contract-fixtures.js'

function records (workspaceId: string, n: number): StreamRecordInput[] {
  return Array.from({ length: n }, (_, i) => ({ workspaceId, schemaVersion: 2, payload: `{"n":${i}}`, acceptedAt: 1000 + i }))
}

export function describeIdempotencyContract (test: StoreTest): void {
  test('stream: appendOnce appends once per key within the window, and answers a retry with the first entry', async (t, store) => {
    const ws = freshWorkspaceId()
    const other = freshWorkspaceId()
    const once = (over: Partial<AppendOnce> = {}): AppendOnce => ({ workspaceId: ws, key: 'k-1', digest: 'd1', note: { message: 'first', errors: ['e'] }, at: 1_000_000, ...over })
    t.same(await store.stream.appendOnce(records(ws, 2), once()), { seqs: [1, 2], earlier: null }, 'first: appended')
    const cases = [
      { description: 'the same key again', once: once({ note: { message: 'second' }, at: 1_000_500 }), expected: { seqs: [1, 2], earlier: { digest: 'd1', note: { message: 'first', errors: ['e'] }, at: 1_000_000 } } },
      { description: 'the same key with another digest: the entry, for the caller to refuse', once: once({ digest: 'd2', at: 1_000_600 }), expected: { seqs: [1, 2], earlier: { digest: 'd1', note: { message: 'first', errors: ['e'] }, at: 1_000_000 } } },
      { description: 'the same key in another workspace', once: once({ workspaceId: other, at: 1_000_700 }), expected: { seqs: [3, 4], earlier: null } },
      { description: 'another key', once: once({ key: 'k-2', at: 1_000_800 }), expected: { seqs: [5, 6], earlier: null } },
      { description: 'the key after its window: appended again', once: once({ digest: 'd3', at: 1_000_000 + IDEMPOTENCY_WINDOW_MS }), expected: { seqs: [7, 8], earlier: null } },
      { description: '…and its new entry holds', once: once({ at: 1_000_001 + IDEMPOTENCY_WINDOW_MS }), expected: { seqs: [7, 8], earlier: { digest: 'd3', note: { message: 'first', errors: ['e'] }, at: 1_000_000 + IDEMPOTENCY_WINDOW_MS } } },
    ]
    for (const c of cases) t.same(await store.stream.appendOnce(records(c.once.workspaceId, 2), c.once), c.expected, c.description)
    t.equal(await store.stream.head(), 8, 'only the appends that were not retries')
  })

  test('stream: concurrent appendOnce calls with one key append once and all answer the same seqs', async (t, store) => {
    const ws = freshWorkspaceId()
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => store.stream.appendOnce(records(ws, 3), { workspaceId: ws, key: 'same', digest: 'd', note: { i }, at: 5000 + i })))
    t.equal(await store.stream.head(), 3, 'appended once')
    t.ok(results.every((r) => r.seqs.join() === '1,2,3'), 'every caller got the seqs of the one append')
    t.equal(results.filter((r) => r.earlier === null).length, 1, 'one caller appended; the others were answered the entry')
  })
}
