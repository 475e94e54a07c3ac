/** The publish-guard options of `list create|update` and `workspace update` (src/feed/guards.ts). */
import { CliError } from './command.js'
import type { GuardSettings } from '../store/types.js'

export const GUARD_OPTIONS = {
  'min-entries': { type: 'string' },
  'max-shrink-pct': { type: 'string' },
  'max-grow-pct': { type: 'string' },
  'reject-special': { type: 'boolean' },
  'guard-mode': { type: 'string' },
  'min-prefix-v4': { type: 'string' },
  'min-prefix-v6': { type: 'string' },
  'clear-guards': { type: 'boolean' },
} as const

export const GUARD_HELP = `  publish guards, all off unless set:
  --min-entries N      hold a build with fewer networks than N (per action, v4 and v6 together)
  --max-shrink-pct P   hold a build with P % fewer networks than the published one
  --max-grow-pct P     hold a build with P % more networks than the published one
  --reject-special     hold a build that publishes IANA special-purpose space (private, loopback,
                       link-local, CGNAT, documentation, multicast, reserved)
  --guard-mode M       hold | drop: what --reject-special does (drop: leave those networks out)
  --min-prefix-v4 L    hold a build with an IP rule target wider than /L (IPv4)
  --min-prefix-v6 L    the same for IPv6
  --clear-guards       remove every guard (then set the ones given)`

/** [name, setting key, lowest, highest] of the numeric guards. */
const NUMBERS = [
  ['min-entries', 'minEntries', 1, 100_000_000],
  ['max-shrink-pct', 'maxShrinkPct', 0, 100],
  ['max-grow-pct', 'maxGrowPct', 0, 1_000_000],
  ['min-prefix-v4', 'minPrefixV4', 0, 32],
  ['min-prefix-v6', 'minPrefixV6', 0, 128],
] as const

/** The guards the options set (an empty object when none), and whether --clear-guards was given. */
export function readGuards (values: Record<string, unknown>): { guards: GuardSettings, clear: boolean } {
  const guards: GuardSettings = {}
  for (const [option, key, low, high] of NUMBERS) {
    const v = values[option] as string | undefined
    if (v === undefined) continue
    const n = /^\d+$/.test(v) ? Number(v) : NaN
    if (!Number.isSafeInteger(n) || n < low || n > high) throw new CliError(`--${option} must be a whole number from ${low} to ${high}, got ${JSON.stringify(v)}`)
    guards[key] = n
  }
  if (values['reject-special'] === true) guards.rejectSpecial = true
  const mode = values['guard-mode'] as string | undefined
  if (mode !== undefined) {
    if (mode !== 'hold' && mode !== 'drop') throw new CliError(`--guard-mode must be one of hold, drop, got ${JSON.stringify(mode)}`)
    guards.mode = mode
  }
  return { guards, clear: values['clear-guards'] === true }
}

/** Guards after an update: the current ones (none with --clear-guards) under the ones given. */
export function mergeGuards (current: GuardSettings | undefined, update: { guards: GuardSettings, clear: boolean }): GuardSettings | undefined {
  const base = update.clear ? {} : { ...current }
  const next = { ...base, ...update.guards }
  return Object.keys(next).length === 0 ? undefined : next
}
