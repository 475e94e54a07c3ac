/** Variant keys as the server writes them: `format|family|action|md5?[|I/N]` (src/feed/snapshot-types.ts). */
export interface Variant { format: string, family: string, action: string, checksum: boolean, shard: string | null }

export function parseVariant (key: string): Variant {
  const [format = '', family = '', action = '', checksum = '', shard] = key.split('|')
  return { format, family, action, checksum: checksum === 'md5', shard: shard ?? null }
}

export function lastPoint<T> (points: readonly T[]): T | undefined {
  return points[points.length - 1]
}

/** When the entry count last moved (or the first point when it never did). */
export function lastChange (points: ReadonlyArray<{ at: string, entries: number }>): string | null {
  for (let i = points.length - 1; i > 0; i--) {
    if (points[i]!.entries !== points[i - 1]!.entries) return points[i]!.at
  }
  return points[0]?.at ?? null
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
