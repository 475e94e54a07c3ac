import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openStore } from '../../src/store/open.js'
import { runStoreContract } from './contract.js'
import { accessInput, freshWorkspaceId } from './contract-fixtures.js'

async function makeDir (): Promise<string> {
  return mkdtemp(join(tmpdir(), 'threatfeed-store-'))
}

runStoreContract(t, 'lmdb', async (opts) => {
  const dir = await makeDir()
  const store = await openStore({ kind: 'embedded', dataDir: dir, ...opts })
  return {
    store,
    cleanup: async () => {
      await store.close()
      await rm(dir, { recursive: true, force: true })
    },
  }
})

t.test('lmdb: the data directory is created when missing, even with a dot in its name', async (t) => {
  const parent = await makeDir()
  t.teardown(() => rm(parent, { recursive: true, force: true }))
  const dir = join(parent, 'nested', 'data.v1')
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  await store.close()
  const again = await openStore({ kind: 'embedded', dataDir: dir })
  t.same(await again.workspaces.get(ws.id), ws, 'reopened, the data is there')
  await again.close()
})

t.test('lmdb: an unusable data directory is TF_ERR_STORE_UNAVAILABLE', async (t) => {
  const parent = await makeDir()
  t.teardown(() => rm(parent, { recursive: true, force: true }))
  const file = join(parent, 'a-file')
  await writeFile(file, 'not a directory')
  await t.rejects(openStore({ kind: 'embedded', dataDir: file }), { code: 'TF_ERR_STORE_UNAVAILABLE' })
})

t.test('lmdb: a purge larger than one transaction chunk removes exactly what is due', async (t) => {
  const dir = await makeDir()
  const store = await openStore({ kind: 'embedded', dataDir: dir })
  t.teardown(async () => {
    await store.close()
    await rm(dir, { recursive: true, force: true })
  })
  const ws = freshWorkspaceId()
  const n = 12_000
  await store.applyRuleBatch({
    ops: Array.from({ length: n }, (_, i) => ({
      op: 'upsertAccessRule' as const,
      input: accessInput(ws, { ruleRef: `r${i}`, expiresAt: 1000 + i }),
    })),
  })
  // All in one expiry bucket, lapsed and live interleaved in index order, over several chunks.
  t.equal(await store.rules.purgeLapsed(1000 + n / 2), n / 2)
  const left = await store.rules.list(ws, 'access_rule')
  t.equal(left.length, n / 2)
  t.ok(left.every((r) => (r.expiresAt ?? 0) >= 1000 + n / 2), 'only live rules are left')
  t.equal(await store.rules.purgeLapsed(1000 + n), n / 2)
})
