/**
 * The arrival index's table (arrival-index.ts ArrivalTable) against a plain list of its entries:
 * inserts, removals by entry and by slot, and growth, with hashes made to share probe runs —
 * few distinct hashes, equal ones, runs that wrap past the last slot — since correctness must
 * never rest on hashes being distinct.
 */
import fc from 'fast-check'
import t, { type Test } from 'tap'
import { ArrivalTable } from '../../../src/store/embedded/arrival-index.js'

/** Every (hash, n) the table holds, as `hash:n`, sorted; and that each is found from its home slot. */
function entries (t: Test, table: ArrivalTable): string[] {
  const out: string[] = []
  for (let i = 0; i < table.numbers.length; i++) {
    const n = table.numbers[i]!
    if (n === 0) continue
    const hash = table.hashes[i]!
    out.push(`${hash}:${n}`)
    let j = table.home(hash)
    while (j !== i && table.numbers[j] !== 0) j = (j + 1) & table.mask
    if (j !== i) t.fail(`entry ${hash}:${n} at slot ${i} is not reached from its home ${table.home(hash)}`)
  }
  t.equal(table.size, out.length, 'size')
  return out.sort()
}

const op = fc.oneof(
  fc.record({ kind: fc.constant('insert' as const), hash: fc.integer({ min: 0, max: 40 }), high: fc.boolean() }),
  fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('removeAt' as const), pick: fc.nat() }),
)

t.test('the table holds exactly what a list of its entries holds', async (t) => {
  fc.assert(fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
    const table = new ArrivalTable(8)
    const model: Array<[number, number]> = []
    let next = 1
    for (const o of ops) {
      if (o.kind === 'insert') {
        // Hashes whose home is the last slots (their low bits): runs that wrap around.
        const hash = o.high ? (2 ** 52) + o.hash * 2 ** 21 + (table.mask - (o.hash & 3)) : o.hash
        table.insert(hash, next)
        model.push([hash, next++])
      } else if (model.length > 0) {
        const at = o.pick % model.length
        const [hash, n] = model[at]!
        if (o.kind === 'remove') table.remove(hash, n)
        else {
          let i = 0
          while (table.numbers[i] !== n) i++
          table.removeAt(i)
        }
        model.splice(at, 1)
      }
    }
    t.strictSame(entries(t, table), model.map(([h, n]) => `${h}:${n}`).sort())
    return true
  }), { numRuns: 300 })
})

t.test('a table of one hash only: every entry is found, and removed', async (t) => {
  const table = new ArrivalTable(4)
  for (let n = 1; n <= 1000; n++) table.insert(7, n)
  t.equal(entries(t, table).length, 1000)
  for (let n = 1000; n >= 1; n -= 2) table.remove(7, n)
  t.strictSame(entries(t, table), Array.from({ length: 500 }, (_, i) => `7:${2 * i + 1}`).sort())
  table.remove(7, 2)
  t.equal(table.size, 500, 'removing what is not there changes nothing')
})
