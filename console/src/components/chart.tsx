/** SVG charts drawn from numbers only (no HTML strings, no inline style: CSP allows them as is). */
import type { Point } from '../types.js'

function scale (values: readonly number[], height: number): (v: number) => number {
  const max = Math.max(1, ...values)
  return (v) => height - (v / max) * height
}

/** Where history comes from (src/http/admin-journal.ts): a point an hour, sampled every 5 minutes once a feed is built. */
export const NO_HISTORY = 'No history yet. A feed is built when it is first polled; from then on its size is sampled every 5 minutes, one point an hour, kept 30 days: the first point appears within 5 minutes of the first poll.'
const NO_HISTORY_SHORT = 'no history yet: starts within 5 min of the first poll'

/** A small line of entries over time, for the overview table. */
export function Sparkline ({ points, label }: { points: readonly Point[], label: string }) {
  const w = 120
  const h = 24
  if (points.length === 0) return <span class="muted" data-testid="no-history">{NO_HISTORY_SHORT}</span>
  const y = scale(points.map((p) => p.entries), h - 2)
  const step = points.length > 1 ? w / (points.length - 1) : 0
  const d = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${(i * step).toFixed(1)},${(y(p.entries) + 1).toFixed(1)}`).join(' ')
  return (
    <svg class="spark" viewBox={`0 0 ${w} ${h}`} width={w} height={h} role="img" aria-label={label}>
      <path d={d} />
    </svg>
  )
}

/**
 * Entries (line) and changes (bars) over the history. A point's changes are its own count when
 * the API gives one, else how far the entry count moved since the point before.
 */
export function HistoryChart ({ points, label }: { points: readonly Point[], label: string }) {
  const w = 600
  const h = 160
  const pad = 4
  if (points.length === 0) return <p class="muted" data-testid="no-history">{NO_HISTORY}</p>
  if (points.length === 1) return <p class="muted" data-testid="no-history">One point so far, sampled for the hour of {points[0]!.at.slice(0, 16).replace('T', ' ')}Z ({points[0]!.entries.toLocaleString('en')} entries): the chart starts with the second hour's point. Points are kept 30 days.</p>
  const changes = points.map((p, i) => p.changes ?? (i === 0 ? 0 : Math.abs(p.entries - points[i - 1]!.entries)))
  const y = scale(points.map((p) => p.entries), h - 2 * pad)
  const yc = scale(changes, (h - 2 * pad) / 3)
  const step = points.length > 1 ? (w - 2 * pad) / (points.length - 1) : 0
  const bar = Math.max(1, step * 0.6)
  const d = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${(pad + i * step).toFixed(1)},${(pad + y(p.entries)).toFixed(1)}`).join(' ')
  const first = points[0]!
  const last = points[points.length - 1]!
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${w} ${h}`} preserveAspectRatio="none" role="img" aria-label={label}>
        {changes.map((c, i) => c === 0
          ? null
          : <rect class="changes" x={(pad + i * step - bar / 2).toFixed(1)} y={(h - pad - ((h - 2 * pad) / 3 - yc(c))).toFixed(1)} width={bar.toFixed(1)} height={((h - 2 * pad) / 3 - yc(c)).toFixed(1)} />)}
        <path class="entries" d={d} />
      </svg>
      <figcaption>
        <span class="key entries">entries</span> {first.entries} → {last.entries}
        {' · '}<span class="key changes">changes</span> {changes.reduce((a, b) => a + b, 0)}
        {' · '}history from {first.at.slice(0, 16).replace('T', ' ')}Z (the first sample) to {last.at.slice(0, 10)}, {points.length} hourly {points.length === 1 ? 'point' : 'points'}; kept 30 days
      </figcaption>
    </figure>
  )
}
