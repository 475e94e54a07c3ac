/** What /readyz says of signals (src/ingest/append-health.ts): failed appends, held a while, and free space. */
import t from 'tap'
import { ThreatfeedError } from '../../src/errors.js'
import { AppendHealth, HOLD_MS } from '../../src/ingest/append-health.js'

const MIB = 2 ** 20
const diskError = new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error('MDB_MAP_FULL') })

t.test('a table of histories', async (t) => {
  const cases: Array<{ description: string, steps: Array<['fail' | 'ok' | 'wait', number?]>, free: number | null, expected: true | RegExp }> = [
    { description: 'nothing happened yet', steps: [], free: null, expected: true },
    { description: 'a success', steps: [['ok']], free: 100 * MIB, expected: true },
    { description: 'one failure', steps: [['fail']], free: null, expected: /^signal stream appends failing for 0 s \(1 batches answered 500\): rule store unavailable: MDB_MAP_FULL$/ },
    { description: 'failures for 3 s', steps: [['fail'], ['wait', 3000], ['fail']], free: null, expected: /^signal stream appends failing for 3 s \(2 batches answered 500\)/ },
    { description: 'a failure, then a success', steps: [['fail'], ['ok']], free: null, expected: true },
    { description: 'a failure held until HOLD_MS passed', steps: [['fail'], ['wait', HOLD_MS - 1]], free: null, expected: /failing/ },
    { description: 'a failure long ago', steps: [['fail'], ['wait', HOLD_MS]], free: null, expected: true },
    { description: 'too little free space', steps: [['ok']], free: 5 * MIB, expected: /^the signal stream's disk has 5\.0 MiB free, under the 16\.0 MiB two of the largest batches may need$/ },
    { description: 'just enough free space', steps: [], free: 16 * MIB, expected: true },
  ]
  for (const c of cases) {
    let now = 1_000_000
    const h = new AppendHealth(() => now)
    for (const [step, ms] of c.steps) {
      if (step === 'fail') h.failed(diskError)
      else if (step === 'ok') h.succeeded()
      else now += ms!
    }
    const r = h.readiness(c.free, 16 * MIB)
    if (c.expected === true) t.equal(r, true, c.description)
    else t.match(r, c.expected, c.description)
  }
})
