/**
 * bench/soak's targets for the admin journal's tables (issue 22: "bounded and swept like the
 * rest"), from the samples the driver took. Each line gives the table's entries at the end of the
 * first and second retention windows and at the end of the run.
 *
 * - Signal batches: from the first sample at the cap on, between the cap and the cap plus a tenth
 *   plus two seconds of batches — src/http/admin-journal.ts sweeps once a tenth of a partition's
 *   cap has been written since the last sweep, and between that write and the sweep's end one more
 *   flush (1 s) and the batches of the sweep's own run land. The cap must be reached by the end of
 *   the first window, so that the flat part is what the windows compare.
 * - Audit log: exactly the admin changes the driver made (±1: one may be in flight at a sample);
 *   its own bound is far off, and the label says how far.
 * - Feed versions: at most one point per variant per hour, each at the start of its hour.
 */
import type { Ratio } from '../lib/report.js'

export interface FeedPoints { variants: number, hours: number, unaligned: number }

export interface JournalSample {
  t: number
  /** Entries per table: batch, feed_size, audit. */
  journal: Record<string, number>
  feedPoints: FeedPoints
  /** Admin changes made so far, less those that failed. */
  adminOkTotal: number
}

export interface JournalTargetOptions {
  /** THREATFEED_BATCH_JOURNAL_MAX given to the server. */
  readonly batchCap: number
  /** Batches the driver sends per second. */
  readonly batchesPerSecond: number
  /** Ends of the first and second retention windows, s. */
  readonly windows: readonly [number, number]
  readonly adminEveryS: number
  readonly auditMax: number
  readonly auditDays: number
}

const min = (t: number): string => `${(t / 60).toFixed(1)} min`

export function journalTargets (samples: readonly JournalSample[], o: JournalTargetOptions): Ratio[] {
  const [w1, w2] = o.windows
  const last = samples[samples.length - 1]
  // The first sample at or past each point; the windows may lie past the run's end.
  const points = [
    { name: 'window 1', s: samples.find((s) => s.t >= w1) },
    { name: 'window 2', s: samples.find((s) => s.t >= w2) },
    { name: 'the end', s: last },
  ]
  const figures = (pick: (s: JournalSample) => string): string =>
    points.map((p) => p.s === undefined ? `— at ${p.name} (not reached)` : `${pick(p.s)} at ${p.name} (${min(p.s.t)})`).join(', ')
  const whole = points.every((p) => p.s !== undefined)
  const out: Ratio[] = []

  const batch = (s: JournalSample): number => s.journal.batch ?? 0
  const slack = Math.ceil(o.batchCap / 10) + Math.ceil(2 * o.batchesPerSecond)
  const high = o.batchCap + slack
  const target = `1–${(high / o.batchCap).toFixed(2)} × cap from the first sample at the cap, reached by window 1`
  const reached = samples.find((s) => batch(s) >= o.batchCap)
  if (reached === undefined) {
    out.push({ case: 'journal: signal batches', label: `never reached the cap of ${o.batchCap} (${figures((s) => String(batch(s)))}; most ${Math.max(0, ...samples.map(batch))})`, value: NaN, target, pass: false })
  } else {
    const flat = samples.filter((s) => s.t >= reached.t).map(batch)
    const lo = Math.min(...flat)
    const hi = Math.max(...flat)
    out.push({
      case: 'journal: signal batches',
      label: `most entries ÷ cap ${o.batchCap} from ${min(reached.t)}, when the cap was reached (${lo}–${hi} over ${flat.length} samples, bound ${high}: cap + a tenth + 2 s of batches); ${figures((s) => String(batch(s)))}`,
      value: hi / o.batchCap,
      target,
      pass: whole && reached.t <= w1 && lo >= o.batchCap && hi <= high,
    })
  }

  const audit = (s: JournalSample): number => s.journal.audit ?? 0
  const daysToCap = o.auditMax * o.adminEveryS / 86_400
  out.push({
    case: 'journal: audit lines',
    label: `audit lines ÷ admin changes made, at the end; ${figures((s) => `${audit(s)}/${s.adminOkTotal}`)}; bound ${o.auditMax.toLocaleString('en')} per workspace and ${o.auditDays} days (one change every ${o.adminEveryS} s reaches the cap in ${daysToCap.toFixed(1)} days)`,
    value: last === undefined || last.adminOkTotal === 0 ? NaN : audit(last) / last.adminOkTotal,
    target: '1 (±1 change in flight) at each point',
    pass: whole && points.every((p) => Math.abs(audit(p.s!) - p.s!.adminOkTotal) <= 1),
  })

  const feed = (s: JournalSample): number => s.journal.feed_size ?? 0
  const sampled = samples.filter((s) => feed(s) > 0)
  out.push({
    case: 'journal: feed versions',
    label: sampled.length === 0
      ? 'no feed size sampled (the server samples every 5 minutes)'
      : `entries ÷ (variants × hours) at the end; ${figures((s) => `${feed(s)} (${s.feedPoints.variants} × ${s.feedPoints.hours})`)}; ${sampled.reduce((n, s) => n + s.feedPoints.unaligned, 0)} points off the hour; bound 720 points per variant (30 days)`,
    value: last === undefined || feed(last) === 0 ? NaN : feed(last) / (last.feedPoints.variants * last.feedPoints.hours),
    target: '≤ 1, each point at the start of its hour',
    pass: whole && sampled.length > 0 && sampled.every((s) => s.feedPoints.unaligned === 0 && feed(s) <= s.feedPoints.variants * s.feedPoints.hours),
  })
  return out
}
