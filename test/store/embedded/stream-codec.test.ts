/**
 * Stream chunks: every record comes back exactly as appended (a v1 record without any
 * schemaVersion key), from any seq and up to any limit.
 */
import fc from 'fast-check'
import t from 'tap'
import { ByteWriter } from '../../../src/store/embedded/byte-writer.js'
import { chunkBatchId, chunkCount, chunkLatestAcceptedAt, decodeChunk, encodeChunk, encodeWholeV1Chunk } from '../../../src/store/embedded/stream-codec.js'
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

/** A JSON array text of `texts`, with the whitespace a client may put around them. */
function arrayText (texts: readonly string[], gap: string): string {
  return `${gap}[${gap}${texts.join(`${gap},${gap}`)}${gap}]${gap}`
}

t.test('a whole v1 batch comes back as its elements\' texts, byte for byte, from any seq, up to any limit', async (t) => {
  const w = new ByteWriter(32)
  const element = fc.oneof(fc.json(), fc.constantFrom('{ "ip" : "192.0.2.1", "description": "caf\\u00e9 é ☃" }', '1.2e2', '"a \\" ] , ["'))
  fc.assert(fc.property(fc.array(element, { minLength: 1, maxLength: 30 }), fc.constantFrom('', ' ', '\n\t'), fc.nat(40), fc.nat(40), fc.integer({ min: 1, max: 1e6 }), (texts, gap, skip, limit, first) => {
    w.reset()
    encodeWholeV1Chunk(w, { workspaceId: 'w', acceptedAt: 7, body: Buffer.from(arrayText(texts, gap)), count: texts.length })
    const buf = Buffer.from(w.view())
    t.equal(chunkCount(buf), texts.length)
    const out: StreamRecord[] = []
    decodeChunk(buf, first, first + skip, limit, out)
    t.strictSame(out, texts.map((payload, i) => ({ seq: first + i, workspaceId: 'w', payload, acceptedAt: 7 })).slice(skip, skip + limit))
    return true
  }), { numRuns: 200 })
})

t.test('refused: whole v1 batches that do not hold what they say', async (t) => {
  const w = new ByteWriter()
  const chunk = (body: string, count: number, extra = ''): Buffer => {
    w.reset()
    encodeWholeV1Chunk(w, { workspaceId: 'w', acceptedAt: 1, body: Buffer.from(body), count })
    return Buffer.concat([w.view(), Buffer.from(extra)])
  }
  const cases: Array<[string, Buffer, RegExp]> = [
    ['fewer elements than recorded', chunk('[1,2]', 3), /a whole v1 batch of 2 elements, recorded as 3/],
    ['more elements than recorded', chunk('[1,2]', 1), /a whole v1 batch of 2 elements, recorded as 1/],
    ['not a JSON array', chunk('{"a":1}', 1), /not a JSON array/],
    ['an unterminated array', chunk('[1,', 1), /not a JSON array/],
    ['bytes after the body', chunk('[1]', 1, 'x'), /bytes after its body/],
    ['a truncated body', chunk('[1,2]', 2).subarray(0, -2), /value ends early/],
  ]
  for (const [name, buf, message] of cases) t.throws(() => decodeChunk(buf, 1, 1, 10, []), { name: 'RangeError', message }, name)
  t.throws(() => decodeChunk(Buffer.from([3, 0, 0, 0, 0]), 1, 1, 10, []), /unknown format 3/, 'a format of its own')
  t.same((() => { const out: StreamRecord[] = []; decodeChunk(chunk('[1,2]', 2), 1, 3, 10, out); return out })(), [], 'a read that starts past the chunk splits nothing')
})

t.test('a batch id is stored once per chunk and read back on each record; chunks without one read as before', async (t) => {
  const id = '5b0c7a52-7d0f-4f59-9b7e-7f2f3c1f0a01'
  const w = new ByteWriter(32)
  const records: StreamRecordInput[] = [{ workspaceId: 'a', payload: 'x', acceptedAt: 5 }, { workspaceId: 'a', schemaVersion: 2, payload: 'y', acceptedAt: 5 }]
  w.reset()
  encodeChunk(w, records, id)
  const withId = Buffer.from(w.view())
  w.reset()
  encodeChunk(w, records)
  const without = Buffer.from(w.view())
  t.equal(withId.length, without.length + 16, 'the id costs 16 bytes a chunk')
  t.equal(chunkBatchId(withId), id)
  t.equal(chunkBatchId(without), undefined)
  t.equal(chunkCount(withId), 2)
  t.equal(chunkLatestAcceptedAt(withId), 5)
  const out: StreamRecord[] = []
  decodeChunk(withId, 10, 11, 5, out)
  t.strictSame(out, [{ seq: 11, workspaceId: 'a', schemaVersion: 2, payload: 'y', acceptedAt: 5, batchId: id }])
  w.reset()
  encodeWholeV1Chunk(w, { workspaceId: 'a', acceptedAt: 7, body: Buffer.from('[1,2]'), count: 2 }, id)
  const whole: StreamRecord[] = []
  decodeChunk(Buffer.from(w.view()), 1, 1, 5, whole)
  t.strictSame(whole.map((r) => [r.seq, r.payload, r.batchId]), [[1, '1', id], [2, '2', id]])
  const bad = [
    { description: 'upper case', input: id.toUpperCase() },
    { description: 'no dashes', input: id.replaceAll('-', '') },
    { description: 'empty', input: '' },
  ]
  for (const c of bad) t.throws(() => { w.reset(); encodeChunk(w, records, c.input) }, TypeError, c.description)
})
