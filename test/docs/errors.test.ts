/**
 * docs/errors.md documents every code of the error registry (src/errors.ts), each with the status,
 * class and fault the registry gives it, and nothing else.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { registry, type ErrorCode } from '../../src/errors.js'

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8')
const rows = [...doc.matchAll(/^\| `(TF_ERR_[A-Z_]+)` \| (\d+) \| (\w+) \| (\w+) \| (.+) \|$/gm)]

t.test('every registry code has one row, and every row is a registry code', async (t) => {
  const codes = rows.map((m) => m[1]!)
  t.same([...codes].sort(), Object.keys(registry).sort())
  t.equal(new Set(codes).size, codes.length, 'no code twice')
})

t.test('each row gives the registry\'s status, class and fault, and says when', async (t) => {
  for (const m of rows) {
    const d = registry[m[1] as ErrorCode]
    if (d === undefined) continue
    t.same({ status: Number(m[2]), name: m[3], fault: m[4] }, { status: d.status, name: d.name, fault: d.fault }, m[1]!)
    t.ok(m[5]!.trim().length > 10, `${m[1]!}: when`)
  }
})
