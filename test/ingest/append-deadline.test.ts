/**
 * The append deadline rule (src/store/commit-gate.ts): a batch whose stream commit has not
 * started by the cutoff (deadline less the margin) is answered 500 at the cutoff and never
 * written; one whose commit has started is waited for. Driven through SignalIngester against a
 * stream that takes its write lock and commits on a schedule, as LMDB and MongoDB do.
 */
import t from 'tap'
import { SignalIngester } from '../../src/ingest/batch.js'
import { ThreatfeedError } from '../../src/errors.js'
import { CommitGate } from '../../src/store/commit-gate.js'
import type { StreamAppend } from '../../src/store/types.js'
import { appendRecords } from '../../src/store/whole-v1-batch.js'
import { MemoryStream } from './memory-stream.js'

const DEADLINE_MS = 300
const MARGIN_MS = 100
const CUTOFF_MS = DEADLINE_MS - MARGIN_MS
/** Timer lateness allowed on a loaded machine. */
const SLACK_MS = 120

interface Schedule {
  /** When the write lock is ours and the transaction's callback runs (null: never). */
  readonly lockAtMs: number | null
  /** How long the commit takes once started. */
  readonly commitMs: number
  /** The commit fails (disk full) instead of succeeding. */
  readonly commitFails?: boolean
}

/** A stream whose transaction runs at `lockAtMs`, calls the gate last, and commits `commitMs` later. */
class ScheduledStream extends MemoryStream {
  constructor (readonly schedule: Schedule) { super() }
  override append (input: StreamAppend, gate?: CommitGate): Promise<number[]> {
    const { lockAtMs, commitMs, commitFails } = this.schedule
    if (lockAtMs === null) return new Promise(() => {}) // the lock is never released
    return new Promise((resolve, reject) => {
      setTimeout(() => {
        try {
          gate?.begin()
        } catch (e) {
          reject(e) // rolled back: nothing is written
          return
        }
        setTimeout(() => {
          if (commitFails === true) {
            reject(new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error('MDB_MAP_FULL') }))
            return
          }
          resolve(super.append(appendRecords(input)))
        }, commitMs)
      }, lockAtMs)
    })
  }
}

const body = Buffer.from('[{"type":"access_rules","action":"block","ip":"192.0.2.1"}]')

t.test('the deadline decision, case by case', async (t) => {
  const cases: Array<{ description: string, schedule: Schedule, expected: { status: number | string, written: boolean, minMs: number, maxMs: number } }> = [
    { description: 'the commit starts well before the cutoff', schedule: { lockAtMs: 10, commitMs: 10 }, expected: { status: 200, written: true, minMs: 0, maxMs: CUTOFF_MS } },
    { description: 'the commit starts just before the cutoff and ends past the deadline: waited for', schedule: { lockAtMs: CUTOFF_MS - 60, commitMs: 250 }, expected: { status: 200, written: true, minMs: CUTOFF_MS + 190, maxMs: CUTOFF_MS + 190 + SLACK_MS } },
    { description: 'the lock comes after the cutoff: 500 at the cutoff, never written', schedule: { lockAtMs: CUTOFF_MS + 80, commitMs: 10 }, expected: { status: 'TF_ERR_STORE_UNAVAILABLE', written: false, minMs: CUTOFF_MS - 5, maxMs: CUTOFF_MS + SLACK_MS } },
    { description: 'the lock is never released: 500 at the cutoff', schedule: { lockAtMs: null, commitMs: 0 }, expected: { status: 'TF_ERR_STORE_UNAVAILABLE', written: false, minMs: CUTOFF_MS - 5, maxMs: CUTOFF_MS + SLACK_MS } },
    { description: 'the commit starts, then fails: 500 with its error', schedule: { lockAtMs: 10, commitMs: 20, commitFails: true }, expected: { status: 'TF_ERR_STORE_UNAVAILABLE', written: false, minMs: 25, maxMs: CUTOFF_MS } },
    { description: 'the commit starts before the cutoff and fails after it: the 500 waits for the failure', schedule: { lockAtMs: CUTOFF_MS - 60, commitMs: 150, commitFails: true }, expected: { status: 'TF_ERR_STORE_UNAVAILABLE', written: false, minMs: CUTOFF_MS + 80, maxMs: CUTOFF_MS + 90 + SLACK_MS } },
  ]
  for (const c of cases) {
    const stream = new ScheduledStream(c.schedule)
    const ingester = new SignalIngester({ stream, checks: { asnExists: () => true, checkExpressions: true }, appendTimeoutMs: DEADLINE_MS, commitMarginMs: MARGIN_MS })
    const started = Date.now()
    const status = await ingester.ingest('v1', 'ws', body).then((o) => o.status, (e: ThreatfeedError) => e.code)
    const ms = Date.now() - started
    t.equal(status, c.expected.status, `${c.description}: answer`)
    t.ok(ms >= c.expected.minMs && ms <= c.expected.maxMs, `${c.description}: answered after ${ms} ms, expected ${c.expected.minMs}–${c.expected.maxMs}`)
    // Whatever was still under way settles within this.
    await new Promise((resolve) => setTimeout(resolve, 400))
    t.equal(stream.records.length > 0, c.expected.written, `${c.description}: written`)
  }
})

t.test('the gate: whoever comes first decides, once', async (t) => {
  let now = 1000
  const clock = () => now
  const cases: Array<{ description: string, steps: Array<'begin' | 'abandon' | 'late'>, expected: Array<string | boolean> }> = [
    { description: 'begin, then the timer', steps: ['begin', 'abandon'], expected: ['started', false] },
    { description: 'the timer, then begin', steps: ['abandon', 'begin'], expected: [true, 'throws'] },
    { description: 'begin at the cutoff', steps: ['late', 'begin', 'abandon'], expected: ['late', 'throws', true] },
    { description: 'a retried transaction past the cutoff (MongoDB)', steps: ['begin', 'late', 'begin'], expected: ['started', 'late', 'throws'] },
    { description: 'a retried transaction before the cutoff', steps: ['begin', 'begin', 'abandon'], expected: ['started', 'started', false] },
  ]
  for (const c of cases) {
    now = 1000
    const gate = new CommitGate(1100, clock)
    const got = c.steps.map((s) => {
      if (s === 'late') { now = 1100; return 'late' }
      if (s === 'abandon') return gate.abandon()
      try { gate.begin(); return gate.state } catch (e) { return (e as ThreatfeedError).code === 'TF_ERR_STORE_UNAVAILABLE' ? 'throws' : String(e) }
    })
    t.same(got, c.expected, c.description)
  }
})
