import t from 'tap'
import { Readable } from 'node:stream'
import { readEntries, SourceError, type SourceEntry } from '../../../src/ingest/bulk/read-entries.js'

/** The input cut into chunks of `size` bytes (cuts fall inside UTF-8 sequences too). */
function chunked (input: string | Buffer, size: number): Readable {
  const buf = Buffer.isBuffer(input) ? input : Buffer.from(input)
  const parts: Buffer[] = []
  for (let i = 0; i < buf.length; i += size) parts.push(buf.subarray(i, i + size))
  return Readable.from(parts)
}

async function collect (input: Readable): Promise<SourceEntry[]> {
  const out: SourceEntry[] = []
  for await (const slice of readEntries(input)) out.push(...slice)
  return out
}

t.test('JSON array and NDJSON, any chunking, exact entry texts', async (t) => {
  const cases: Array<{ description: string, input: string, expected: string[] }> = [
    { description: 'JSON array', input: '[{"a":1}, {"b": "é😀"},\n{"c":[1,2]}]\n', expected: ['{"a":1}', '{"b": "é😀"}', '{"c":[1,2]}'] },
    { description: 'JSON array after blank lines', input: '\n\n  [ {"a":1} ]', expected: ['{"a":1}'] },
    { description: 'empty array', input: '[]', expected: [] },
    { description: 'NDJSON', input: '{"a":1}\n{"b":2}\n', expected: ['{"a":1}', '{"b":2}'] },
    { description: 'NDJSON with CRLF, blank lines, no final newline', input: '{"a":1}\r\n\r\n  {"b":"é"}  \n{"c":3}', expected: ['{"a":1}', '{"b":"é"}', '{"c":3}'] },
    { description: 'NDJSON keeps bad lines for the loader to report', input: '{"a":1}\nnot json\n', expected: ['{"a":1}', 'not json'] },
    { description: 'empty file', input: '', expected: [] },
  ]
  for (const c of cases) {
    for (const size of [1, 2, 3, 7, 1 << 16]) {
      const got = await collect(chunked(c.input, size))
      t.same(got.map((e) => e.text), c.expected, `${c.description} (chunks of ${size})`)
      t.same(got.map((e) => e.index), c.expected.map((_, i) => i))
    }
  }
})

t.test('files that cannot be read', async (t) => {
  const cases: Array<{ description: string, input: string | Buffer, message: string }> = [
    { description: 'broken array', input: '[{"a":1} {"b":2}]', message: 'not a JSON array: expected "," or "]" at offset 9' },
    { description: 'unterminated array', input: '[{"a":1},', message: 'not a JSON array: unterminated array at offset 9' },
    { description: 'invalid UTF-8', input: Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d, 0x0a]), message: 'the file is not valid UTF-8 (between bytes 0 and 6)' },
    { description: 'truncated UTF-8', input: Buffer.from([0x5b, 0x22, 0xc3]), message: 'the file ends inside a UTF-8 sequence' },
  ]
  for (const c of cases) {
    await t.rejects(collect(chunked(c.input, 1 << 16)), new SourceError(c.message), c.description)
  }
})

t.test('streams a large file without holding it: slices as chunks arrive, bytes reported', async (t) => {
  const n = 20_000
  async function * lines () {
    for (let i = 0; i < n; i += 100) {
      yield Buffer.from(Array.from({ length: 100 }, (_, k) => `{"type":"access_rules","action":"block","ip":"10.0.${(i + k) >> 8 & 255}.${(i + k) & 255}"}\n`).join(''))
    }
  }
  let bytes = 0
  let slices = 0
  let count = 0
  for await (const slice of readEntries(Readable.from(lines()), (b) => { bytes = b })) {
    slices++
    count += slice.length
  }
  t.equal(count, n)
  t.ok(slices > 1, `${slices} slices`)
  t.ok(bytes > n * 50)
})
