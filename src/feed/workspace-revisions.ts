/** Every workspace's rules revision in one read where the store offers it (RuleStore#revisionsOf). */
import type { RuleStore } from '../store/types.js'

export async function workspaceRevisions (rules: RuleStore, ids: readonly string[]): Promise<Map<string, number>> {
  if (rules.revisionsOf !== undefined) return rules.revisionsOf(ids)
  const out = new Map<string, number>()
  for (const id of ids) out.set(id, await rules.revisionOf(id))
  return out
}
