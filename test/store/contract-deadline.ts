/**
 * Store contract, the append deadline rule (README "Decisions beyond the spec", Signals;
 * commit-gate.ts): an append whose commit cannot start before its cutoff — or that its caller
 * abandoned — writes nothing, takes no seq and leaves no gap; one with time left commits and
 * counts as started. The same on every store (MongoDB: the transaction is aborted, never
 * committed after its deadline).
 */
import { CommitGate } from '../../src/store/commit-gate.js'
import type { StreamAppend } from '../../src/store/types.js'
import type { StoreTest } from './contract.js'
import { freshWorkspaceId } from './contract-fixtures.js'

export function describeDeadlineContract (test: StoreTest): void {
  test('append deadline: past the cutoff or abandoned, nothing is written and no seq is taken', async (t, store) => {
    const ws = freshWorkspaceId()
    const v1 = (n: number): StreamAppend => {
      const texts = Array.from({ length: n }, (_, i) => `{"type":"access_rules","action":"block","ip":"192.0.2.${i + 1}"}`)
      return { workspaceId: ws, acceptedAt: 1000, body: Buffer.from(`[${texts.join(',')}]`), count: n }
    }
    const records = (n: number): StreamAppend => Array.from({ length: n }, (_, i) => ({ workspaceId: ws, schemaVersion: 2, payload: `{"n":${i}}`, acceptedAt: 1000 }))
    t.same(await store.stream.append(records(2)), [1, 2], 'two records before')
    const refused: Array<{ description: string, gate: () => CommitGate, append: StreamAppend }> = [
      { description: 'records, cutoff already passed', gate: () => new CommitGate(Date.now() - 1), append: records(3) },
      { description: 'a whole v1 batch, cutoff already passed', gate: () => new CommitGate(Date.now() - 1), append: v1(500) },
      {
        description: 'abandoned by its caller before the write',
        gate: () => {
          const g = new CommitGate(Date.now() + 60_000)
          g.abandon()
          return g
        },
        append: v1(10),
      },
    ]
    for (const c of refused) {
      const gate = c.gate()
      await t.rejects(store.stream.append(c.append, gate), { code: 'TF_ERR_STORE_UNAVAILABLE' }, `${c.description}: answered as a store failure`)
      t.equal(gate.state, 'abandoned', `${c.description}: the gate says abandoned`)
      t.equal(await store.stream.head(), 2, `${c.description}: no seq taken`)
      t.same((await store.stream.read(3, 1000)).length, 0, `${c.description}: nothing to read`)
    }
    const gate = new CommitGate(Date.now() + 60_000)
    t.same(await store.stream.append(v1(3), gate), [3, 4, 5], 'with time left: written, right after the last written seq')
    t.equal(gate.state, 'started', 'the commit counted as started')
    t.equal(gate.abandon(), false, 'a started commit is not abandoned at the cutoff: it is waited for')
    t.same((await store.stream.read(1, 100)).map((r) => r.seq), [1, 2, 3, 4, 5], 'no gap where the refused appends were')
  })
}
