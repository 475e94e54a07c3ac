/**
 * The copies both stores keep of a list's guard settings and publish state (src/feed/guards.ts):
 * known fields only, each a plain value of its type, so nothing else of a caller's object — and
 * no query operator — reaches a record.
 */
import type { GuardSettings, PublishState } from './types.js'

const NUMBERS = ['minEntries', 'maxShrinkPct', 'maxGrowPct', 'minPrefixV4', 'minPrefixV6'] as const

export function copyGuards (g: GuardSettings): GuardSettings {
  const out: GuardSettings = {}
  for (const k of NUMBERS) {
    const v = g[k]
    if (typeof v === 'number' && Number.isFinite(v)) out[k] = v
  }
  if (g.rejectSpecial === true) out.rejectSpecial = true
  if (g.mode === 'hold' || g.mode === 'drop') out.mode = g.mode
  if (typeof g.accepted === 'string') out.accepted = g.accepted
  return out
}

/** A deep copy through JSON: the state is the server's own data, made of strings and numbers. */
export function copyPublishState (s: PublishState): PublishState {
  return JSON.parse(JSON.stringify(s)) as PublishState
}
