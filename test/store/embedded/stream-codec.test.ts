/**
 * Stream chunks: every record comes back exactly as appended (a v1 record without any
 * schemaVersion key), from any seq and up to any limit.
 */
import fc from 'fast-check'
import t from 'tap'
import { ByteWriter } from '../../../src/store/embedded/byte-writer.js'
import { chunkCount, decodeChunk, encodeChunk } from '../../../src/store/embedded/stream-codec.js'
import type { StreamRecord, StreamRecordInput } from '../../../src/store/types.js'

const recordArb: fc.Arbitrary<StreamRecordInput> = fc.record({
  workspaceId: fc.constantFrom('a', 'b', '5b0c7a52-7d0f-4f59-9b7e-7f2f3c1f0a01'),
  acceptedAt: fc.constantFrom(0, 1, 1_700_000_000_000),
  schemaVersion: fc.option(fc.constantFrom(1, 2, 3), { nil: undefined }),
  payload: fc.oneof(fc.string({ maxLength: 200 }), fc.string({ unit: 'binary', maxLength: 200 }), fc.json()),
}).map(({ schemaVersion, ...r }) => (schemaVersion === undefined ? r : { ...r, schemaVersion }))

t.test('records come back as appended, from any seq, up to any limit', async (t) => {
  const w = new ByteWriter(32)
  fc.assert(fc.property(fc.array(recordArb, { minLength: 1, maxLength: 30 }), fc.nat(40), fc.nat(40), fc.integer({ min: 1, max: 1e6 }), (records, skip, limit, first) => {
    w.reset()
    encodeChunk(w, records)
    const buf = Buffer.from(w.view())
    t.equal(chunkCount(buf), records.length)
    const out: StreamRecord[] = []
    decodeChunk(buf, first, first + skip, limit, out)
    const want = records.map((r, i) => ({ seq: first + i, ...r })).slice(skip, skip + limit)
    t.strictSame(out, want)
    for (const r of out) if (!('schemaVersion' in records[r.seq - first]!)) t.notOk('schemaVersion' in r)
    return true
  }), { numRuns: 200 })
})

t.test('a decode appends to what `out` holds and stops at its limit', async (t) => {
  const w = new ByteWriter()
  encodeChunk(w, [{ workspaceId: 'w', acceptedAt: 1, payload: 'x' }, { workspaceId: 'w', acceptedAt: 1, payload: 'y' }])
  const out: StreamRecord[] = [{ seq: 1, workspaceId: 'v', acceptedAt: 0, payload: 'before' }]
  decodeChunk(Buffer.from(w.view()), 2, 2, 2, out)
  t.same(out.map((r) => r.payload), ['before', 'x'])
})

t.test('refused: versions that do not fit, and values of another form', async (t) => {
  const w = new ByteWriter()
  for (const schemaVersion of [-1, 1.5, 2 ** 32]) {
    w.reset()
    t.throws(() => encodeChunk(w, [{ workspaceId: 'w', acceptedAt: 1, schemaVersion, payload: '{}' }]), TypeError, `schemaVersion ${schemaVersion}`)
  }
  t.throws(() => decodeChunk(Buffer.from('["w",1,null,"{}"]'), 1, 1, 10, []), RangeError, 'a format-1 JSON tuple')
  w.reset()
  encodeChunk(w, [{ workspaceId: 'w', acceptedAt: 1, payload: 'a payload' }])
  t.throws(() => decodeChunk(Buffer.from(w.view()).subarray(0, w.pos - 3), 1, 1, 10, []), RangeError, 'a truncated chunk')
})
