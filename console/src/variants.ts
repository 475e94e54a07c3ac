/** Variant keys as the server writes them: `format|family|action|md5?[|I/N]` (src/feed/snapshot-types.ts). */
export interface Variant { format: string, family: string, action: string, checksum: boolean, shard: string | null }

export function parseVariant (key: string): Variant {
  const [format = '', family = '', action = '', checksum = '', shard] = key.split('|')
  return { format, family, action, checksum: checksum === 'md5', shard: shard ?? null }
}

export function lastPoint<T> (points: readonly T[]): T | undefined {
  return points[points.length - 1]
}

const FORMAT_NAMES: Record<string, string> = { plain: 'plain', dialect_a: 'dialect A', dialect_b: 'dialect B (CSV)', nftables: 'nftables' }
const FAMILY_NAMES: Record<string, string> = { both: 'IPv4 + IPv6', v4: 'IPv4', v6: 'IPv6' }

/** `dialect_a|both|block||3/4` → `dialect A, IPv4 + IPv6, block, shard 3 of 4` (the key stays in a title). */
export function describeVariant (key: string): string {
  if (key === '') return '—'
  const v = parseVariant(key)
  const parts = [FORMAT_NAMES[v.format] ?? v.format, FAMILY_NAMES[v.family] ?? v.family, v.action]
  if (v.checksum) parts.push('MD5 checksum')
  if (v.shard !== null) {
    const [i, n] = v.shard.split('/')
    parts.push(n === undefined ? `shard ${v.shard}` : `shard ${i} of ${n}`)
  }
  return parts.join(', ')
}

/** The admin API's guard fields as an operator reads them (the CLI flag is the field in kebab-case). */
const GUARD_NAMES: Record<string, string> = {
  min_entries: 'Minimum entries',
  max_shrink_pct: 'Largest shrink',
  max_grow_pct: 'Largest growth',
  reject_special: 'Refuse special ranges',
  mode: 'On a trip',
  min_prefix_v4: 'Widest IPv4 prefix',
  min_prefix_v6: 'Widest IPv6 prefix',
}

export function guardName (field: string): string {
  return GUARD_NAMES[field] ?? field.replaceAll('_', ' ')
}

export function guardValue (field: string, v: unknown): string {
  if (v === null || v === undefined) return '—'
  if (field === 'max_shrink_pct' || field === 'max_grow_pct') return `${String(v)} % between builds`
  if (field === 'min_prefix_v4' || field === 'min_prefix_v6') return `/${String(v)}`
  if (field === 'mode') return v === 'drop' ? 'drop what trips (publish the rest)' : 'hold the build (serve the last published one)'
  if (field === 'reject_special') return v === true ? 'yes' : 'no'
  return typeof v === 'number' ? v.toLocaleString('en') : String(v)
}

/** `block: Largest shrink` for a held build's guards per action. */
export function describeHeldGuards (guards: Record<string, string>): string {
  return Object.entries(guards).map(([action, g]) => `${action}: ${guardName(g)}`).join(', ')
}

export function formatBytes (n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${(n / 1024 / 1024).toFixed(1)} MiB`
}

export function formatTime (iso: string | null | undefined): string {
  if (iso === null || iso === undefined) return '—'
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? iso : d.toISOString().replace('T', ' ').slice(0, 19) + 'Z'
}

/** A list's defaults with the server's own for what it leaves unset (README "Lists": plain, both, block, 131072). */
export function effectiveDefaults (d: { format?: string, family?: string, action?: string, max_entries?: number }): { format: string, family: string, action: string, max_entries: number } {
  return { format: d.format ?? 'plain', family: d.family ?? 'both', action: d.action ?? 'block', max_entries: d.max_entries ?? 131_072 }
}
