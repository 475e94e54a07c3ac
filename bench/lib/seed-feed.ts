/**
 * The store the feed benches serve (bench/feeds, bench/tls): one workspace with a feeds:read key
 * and `entries` host routes, every other address from 10.0.0.0, so none coalesce and the feed holds
 * exactly that many networks (131,072, the default cap: a 200, not a 413).
 */
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import type { RuleOp } from '../../src/store/batch-types.js'

export async function seedFeedStore (dataDir: string, entries: number): Promise<{ workspaceId: string, key: string }> {
  const store = await openStore({ kind: 'embedded', dataDir })
  const ws = await store.workspaces.create({ name: 'bench', subscription: 'active' })
  const key = generateApiKey()
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['feeds:read'] })
  const CHUNK = 16_384
  for (let start = 0; start < entries; start += CHUNK) {
    const ops: RuleOp[] = []
    for (let i = start; i < Math.min(entries, start + CHUNK); i++) {
      const a = 0x0a000000 + i * 2
      const ip = `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}/32`
      ops.push({ op: 'upsertAccessRule', input: { kind: 'access_rule', workspaceId: ws.id, ruleRef: null, labels: {}, reason: null, expiresAt: null, seq: i + 1, target: { type: 'ip', value: ip }, action: 'block', name: null, confidence: null, severity: null } })
    }
    await store.applyRuleBatch({ ops })
  }
  await store.close()
  return { workspaceId: ws.id, key }
}
