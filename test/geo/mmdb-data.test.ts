import assert from 'node:assert'
import t from 'tap'
import fc from 'fast-check'
import { DataDecoder } from '../../src/geo/mmdb-data.js'
import { DataSectionEncoder, type MmdbValue } from '../../src/geo/mmdb-encoder.js'
import { utf8 } from './fixtures.js'

const decoderOf = (bytes: number[] | Buffer): DataDecoder => {
  const b = Buffer.from(bytes)
  return new DataDecoder(b, 0, b.length)
}

t.test('decodes every type it meets in geo databases', async (t) => {
  const cases: { description: string, input: number[], at?: number, expected: unknown }[] = [
    { description: 'utf8', input: utf8('ab'), expected: 'ab' },
    { description: 'empty utf8', input: [0x40], expected: '' },
    { description: 'uint16', input: [0xa2, 0x01, 0x2c], expected: 300 },
    { description: 'uint32 of zero bytes is 0', input: [0xc0], expected: 0 },
    { description: 'uint32', input: [0xc4, 0xff, 0xff, 0xff, 0xff], expected: 4294967295 },
    { description: 'int32 negative', input: [0x04, 0x01, 0xff, 0xff, 0xff, 0xfe], expected: -2 },
    { description: 'uint64 (extended 9) small', input: [0x02, 0x02, 0x01, 0x00], expected: 256 },
    { description: 'uint64 beyond 2^53 is a bigint', input: [0x08, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], expected: 2n ** 64n - 1n },
    { description: 'uint128 (extended 10)', input: [0x01, 0x03, 0x07], expected: 7 },
    { description: 'boolean true (extended 14, value in the size)', input: [0x01, 0x07], expected: true },
    { description: 'boolean false', input: [0x00, 0x07], expected: false },
    { description: 'double', input: [0x68, ...Buffer.from([0x3f, 0xf8, 0, 0, 0, 0, 0, 0])], expected: 1.5 },
    { description: 'float (extended 15)', input: [0x04, 0x08, 0x3f, 0xc0, 0, 0], expected: 1.5 },
    { description: 'map', input: [0xe1, ...utf8('a'), 0xc1, 0x01], expected: { a: 1 } },
    { description: 'array (extended 11)', input: [0x02, 0x04, ...utf8('a'), ...utf8('b')], expected: ['a', 'b'] },
    { description: 'pointer to an earlier value (size 0)', input: [...utf8('ab'), 0x20, 0x00], at: 3, expected: 'ab' },
    { description: 'pointer of size 3 (a plain 32-bit offset)', input: [0x38, 0, 0, 0, 5, ...utf8('a')], expected: 'a' },
    { description: 'map with a pointer key', input: [...utf8('key'), 0xe1, 0x20, 0x00, 0xc1, 0x05], at: 4, expected: { key: 5 } },
    { description: 'size 29 + one byte', input: [0x5d, 0x01, ...Buffer.alloc(30, 0x61)], expected: 'a'.repeat(30) },
  ]
  for (const c of cases) {
    t.same(decoderOf(c.input).decode(c.at ?? 0), c.expected, c.description)
  }
})

t.test('refuses corrupt data with a reason, never a crash or a hang', async (t) => {
  const cases: { description: string, input: number[], at?: number, expected: RegExp }[] = [
    { description: 'pointer past the section', input: [0x20, 0x10], expected: /points to 16, outside the data section \(2 bytes\)/ },
    { description: 'pointer to a pointer', input: [0x20, 0x02, 0x20, 0x00], expected: /points to another pointer/ },
    { description: 'map holding a pointer to itself', input: [0xe1, ...utf8('a'), 0x20, 0x00], expected: /nested deeper than 64 levels/ },
    { description: 'array holding a pointer to itself', input: [0x01, 0x04, 0x20, 0x00], expected: /nested deeper than 64 levels/ },
    { description: 'string longer than the section', input: [0x45, 0x61], expected: /runs past the data section/ },
    { description: 'uint32 of 5 bytes', input: [0xc5, 1, 2, 3, 4, 5], expected: /invalid size 5 for data type 6/ },
    { description: 'double of 4 bytes', input: [0x64, 1, 2, 3, 4], expected: /invalid size 4 for data type 3/ },
    { description: 'extended type 16', input: [0x00, 0x09], expected: /invalid extended type 16/ },
    { description: 'extended container type', input: [0x00, 0x05], expected: /invalid extended type 12/ },
    { description: 'extended type byte missing', input: [0x00], expected: /truncated extended type/ },
    { description: 'size bytes missing', input: [0x5e, 0x01], expected: /truncated size/ },
    { description: 'offset past the end', input: [0x40], at: 5, expected: /data offset 5 outside the data section/ },
    { description: 'map key that is not a string', input: [0xe1, 0xc1, 0x01, 0xc1, 0x01], expected: /map key at data offset 1 is not a string/ },
    { description: 'size-2 pointer (biased by 526336) in a small section', input: [0x30, 0, 0, 0], expected: /points to 526336, outside/ },
    { description: 'truncated pointer', input: [0x28, 0x00], expected: /pointer at data offset 0 runs past/ },
  ]
  for (const c of cases) {
    t.throws(() => decoderOf(c.input).decode(c.at ?? 0), { name: 'MmdbFormatError', message: c.expected }, c.description)
  }
})

t.test('find walks a key path without decoding siblings', async (t) => {
  const enc = new DataSectionEncoder()
  const rec = enc.write({ continent: { code: 'EU', names: { en: 'Europe' } }, country: { iso_code: 'DE', names: { en: 'Germany' } } })
  const d = new DataDecoder(enc.bytes(), 0, enc.length)
  const key = (s: string): Uint8Array => Buffer.from(s)
  t.equal(d.readString(d.find(rec, [key('country'), key('iso_code')])), 'DE')
  t.equal(d.find(rec, [key('country'), key('code')]), -1, 'absent key')
  t.equal(d.find(rec, [key('country'), key('iso_code'), key('x')]), -1, 'a string is not a map')
  t.equal(d.readUint(d.find(rec, [key('country')])), undefined, 'a map is not an integer')
  t.equal(d.readString(d.find(rec, [key('continent'), key('names'), key('en')])), 'Europe')
  // The second record reuses the interned key strings through pointers: find follows them.
  const rec2 = enc.write({ country: { iso_code: 'FR' } })
  const d2 = new DataDecoder(enc.bytes(), 0, enc.length)
  t.equal(d2.readString(d2.find(rec2, [key('country'), key('iso_code')])), 'FR')
  t.ok(enc.bytes().subarray(rec2).length < 20, 'keys are pointers the second time')
})

// Values the encoder writes decode back to themselves (typed numbers aside, which are tested
// through the metadata of every written file).
const valueArb: fc.Arbitrary<MmdbValue> = fc.letrec<{ v: MmdbValue }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.string({ unit: 'grapheme', maxLength: 40 }),
    fc.integer({ min: 0, max: 0xffffffff }),
    fc.integer({ min: -0x80000000, max: -1 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Number.isInteger(x)),
    fc.boolean(),
    fc.array(tie('v'), { maxLength: 5 }),
    fc.dictionary(fc.string({ maxLength: 8 }).filter((k) => k !== '__proto__'), tie('v'), { maxKeys: 5 }),
  ),
})).v

t.test('encode then decode is the identity (property)', async (t) => {
  fc.assert(fc.property(fc.array(valueArb, { minLength: 1, maxLength: 6 }), (values) => {
    const enc = new DataSectionEncoder()
    const at = values.map((v) => enc.write(v))
    const d = new DataDecoder(enc.bytes(), 0, enc.length)
    // Loose deep equality: decoded maps have a null prototype.
    at.forEach((o, i) => assert.deepEqual(d.decode(o), values[i]))
  }), { numRuns: 300 })
  t.pass('300 random value lists round-tripped')
})
