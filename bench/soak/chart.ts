/**
 * bench/soak's chart: small multiples sharing a time axis, one polyline per series, drawn as
 * plain SVG (no chart library for a handful of lines). Shaded bands mark the slices in which the
 * sweep and trim were paused; dashed verticals mark the retention windows the targets compare.
 */

export interface Series {
  readonly label: string
  readonly color: string
  /** One value per x; null leaves a gap. */
  readonly values: ReadonlyArray<number | null>
}

export interface Panel {
  readonly title: string
  readonly unit: string
  readonly series: readonly Series[]
}

export interface ChartInput {
  readonly title: string
  /** Seconds since the start, one per sample. */
  readonly xs: readonly number[]
  readonly panels: readonly Panel[]
  /** [from, to] seconds: housekeeping paused. */
  readonly offBands: ReadonlyArray<readonly [number, number]>
  /** Seconds, with a label each. */
  readonly markers: ReadonlyArray<{ at: number, label: string }>
}

const W = 960
const PANEL_H = 170
const GAP = 46
const LEFT = 70
const RIGHT = 170
const TOP = 50

function esc (s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/** 1, 2 or 5 times a power of ten, so that about `n` ticks span `max`. */
function niceStep (max: number, n: number): number {
  const raw = max / n
  const p = 10 ** Math.floor(Math.log10(raw))
  for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p
  return 10 * p
}

function fmt (v: number): string {
  if (v === 0) return '0'
  if (Math.abs(v) >= 1e6) return `${+(v / 1e6).toFixed(2)}M`
  if (Math.abs(v) >= 1e3) return `${+(v / 1e3).toFixed(1)}k`
  return `${+v.toFixed(2)}`
}

export function drawChart (c: ChartInput): string {
  const plotW = W - LEFT - RIGHT
  const height = TOP + c.panels.length * (PANEL_H + GAP) + 20
  const xMax = Math.max(60, ...c.xs)
  const xStep = niceStep(xMax / 60, 10) * 60
  const x = (s: number): number => LEFT + (s / xMax) * plotW
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${height}" fill="white"/>`,
    `<text x="${LEFT}" y="22" font-size="15" font-weight="bold">${esc(c.title)}</text>`,
    `<text x="${LEFT}" y="38" fill="#555">grey bands: sweep and trim paused; dashed lines: retention windows; x: minutes since the load started</text>`,
  ]
  c.panels.forEach((p, i) => {
    const top = TOP + i * (PANEL_H + GAP) + 10
    const bottom = top + PANEL_H
    const all = p.series.flatMap((s) => s.values.filter((v): v is number => v !== null && Number.isFinite(v)))
    const yMax = Math.max(1e-9, ...all) * 1.08
    const yStep = niceStep(yMax, 4)
    const y = (v: number): number => bottom - (v / (yStep * Math.ceil(yMax / yStep))) * PANEL_H
    for (const [a, b] of c.offBands) out.push(`<rect x="${x(a).toFixed(1)}" y="${top}" width="${Math.max(0, x(b) - x(a)).toFixed(1)}" height="${PANEL_H}" fill="#e8e8e8"/>`)
    for (let v = 0; v <= yMax + 1e-9; v += yStep) {
      out.push(`<line x1="${LEFT}" x2="${LEFT + plotW}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#ddd"/>`)
      out.push(`<text x="${LEFT - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" fill="#333">${fmt(v)}</text>`)
    }
    for (let s = 0; s <= xMax; s += xStep) {
      out.push(`<line x1="${x(s).toFixed(1)}" x2="${x(s).toFixed(1)}" y1="${bottom}" y2="${bottom + 4}" stroke="#333"/>`)
      out.push(`<text x="${x(s).toFixed(1)}" y="${bottom + 16}" text-anchor="middle" fill="#333">${+(s / 60).toFixed(1)}</text>`)
    }
    for (const m of c.markers) {
      out.push(`<line x1="${x(m.at).toFixed(1)}" x2="${x(m.at).toFixed(1)}" y1="${top}" y2="${bottom}" stroke="#888" stroke-dasharray="4 3"/>`)
      if (i === 0) out.push(`<text x="${(x(m.at) + 3).toFixed(1)}" y="${top + 11}" fill="#666">${esc(m.label)}</text>`)
    }
    out.push(`<rect x="${LEFT}" y="${top}" width="${plotW}" height="${PANEL_H}" fill="none" stroke="#333"/>`)
    out.push(`<text x="${LEFT}" y="${top - 5}" font-weight="bold">${esc(p.title)} <tspan font-weight="normal" fill="#555">(${esc(p.unit)})</tspan></text>`)
    p.series.forEach((s, k) => {
      let d = ''
      let pen = false
      s.values.forEach((v, j) => {
        if (v === null || !Number.isFinite(v)) { pen = false; return }
        d += `${pen ? 'L' : 'M'}${x(c.xs[j]!).toFixed(1)},${y(v).toFixed(1)}`
        pen = true
      })
      out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.8"/>`)
      const ly = top + 14 + k * 16
      out.push(`<line x1="${LEFT + plotW + 10}" x2="${LEFT + plotW + 26}" y1="${ly - 4}" y2="${ly - 4}" stroke="${s.color}" stroke-width="2.5"/>`)
      out.push(`<text x="${LEFT + plotW + 30}" y="${ly}">${esc(s.label)}</text>`)
    })
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}
