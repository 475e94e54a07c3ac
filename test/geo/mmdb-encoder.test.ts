import t from 'tap'
import { DataDecoder } from '../../src/geo/mmdb-data.js'
import { DataSectionEncoder, mmdbDouble, mmdbUint16, mmdbUint32, mmdbUint64, type MmdbTypedNumber, type MmdbValue } from '../../src/geo/mmdb-encoder.js'

function roundTrip (v: MmdbValue, enc = new DataSectionEncoder()): unknown {
  const at = enc.write(v)
  return new DataDecoder(enc.bytes(), 0, enc.length).decode(at)
}

t.test('every size class of the control byte round-trips', async (t) => {
  for (const n of [0, 28, 29, 284, 285, 65820, 65821, 70000]) {
    const s = 'x'.repeat(n)
    t.equal(roundTrip(s), s, `${n}-byte string`)
  }
  const bytes = new Uint8Array([1, 2, 3])
  t.same(roundTrip(bytes), Buffer.from(bytes), 'bytes')
  t.same(roundTrip(Array.from({ length: 300 }, (_, i) => i)), Array.from({ length: 300 }, (_, i) => i), '300-entry array')
})

t.test('numbers take the type their value or their wrapper says', async (t) => {
  const typed = (type: MmdbTypedNumber['type'], value: number | bigint): MmdbTypedNumber => ({ ...mmdbUint16(0), type, value })
  const cases: { description: string, input: MmdbValue, expected: unknown, ctrl?: number[] }[] = [
    { description: 'uint32 from a small integer', input: 7, expected: 7, ctrl: [0xc1, 7] },
    { description: 'int32 from a negative integer', input: -7, expected: -7 },
    { description: 'uint64 from a large safe integer', input: 2 ** 40, expected: 2 ** 40 },
    { description: 'double from a fraction', input: 0.25, expected: 0.25 },
    { description: 'double from a huge negative', input: -(2 ** 40), expected: -(2 ** 40) },
    { description: 'uint64 from a bigint', input: 2n ** 63n, expected: 2n ** 63n },
    { description: 'uint128 from a bigint', input: 2n ** 100n, expected: 2n ** 100n },
    { description: 'uint16 wrapper', input: mmdbUint16(300), expected: 300, ctrl: [0xa2, 1, 44] },
    { description: 'uint32 wrapper', input: mmdbUint32(0), expected: 0, ctrl: [0xc0] },
    { description: 'uint64 wrapper', input: mmdbUint64(1700000000), expected: 1700000000, ctrl: [0x04, 0x02, 0x65, 0x53, 0xf1, 0x00] },
    { description: 'uint128 wrapper', input: typed('uint128', 5n), expected: 5 },
    { description: 'int32 wrapper', input: typed('int32', -1), expected: -1 },
    { description: 'double wrapper of an integer', input: mmdbDouble(2), expected: 2, ctrl: [0x68, 0x40, 0, 0, 0, 0, 0, 0, 0] },
    { description: 'float wrapper', input: typed('float', 1.5), expected: 1.5 },
    { description: 'booleans', input: [true, false], expected: [true, false] },
  ]
  for (const c of cases) {
    const enc = new DataSectionEncoder()
    t.same(roundTrip(c.input, enc), c.expected, c.description)
    if (c.ctrl !== undefined) t.same(Array.from(enc.bytes()), c.ctrl, `${c.description}: bytes`)
  }
  t.throws(() => roundTrip(mmdbUint16(70000)), RangeError, 'uint16 overflow')
  t.throws(() => roundTrip(mmdbUint64(-1)), RangeError, 'negative unsigned')
})

t.test('interned strings become pointers, sized by the target offset', async (t) => {
  // Pointer sizes 0, 1 and 2 (targets below 2048, 526336 and 134744064); size 3 would need a
  // 128 MiB section, and is decoded by the decoder tests' fixed-size case.
  for (const pad of [0, 3000, 600000]) {
    const enc = new DataSectionEncoder()
    if (pad > 0) enc.write('y'.repeat(pad))
    const target = enc.write('interned')
    const ptr = enc.write('interned')
    const ctrl = enc.bytes()[ptr]!
    t.equal(ctrl >> 5, 1, `target ${target}: a pointer, not a copy`)
    t.equal(enc.length - ptr, ((ctrl >> 3) & 3) + 2, 'pointer size as its control byte says')
    t.equal(new DataDecoder(enc.bytes(), 0, enc.length).decode(ptr), 'interned')
  }
  const plain = new DataSectionEncoder({ intern: false })
  plain.write('not interned')
  const again = plain.write('not interned')
  t.equal(plain.bytes()[again]! >> 5, 2, 'the metadata encoder writes strings inline')
  plain.truncate(0)
  t.equal(plain.length, 0)
})
