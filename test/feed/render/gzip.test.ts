import t from 'tap'
import fc from 'fast-check'
import { crc32, gunzipSync } from 'node:zlib'
import { ChunkCompressor, crc32Combine, GZIP_LEVEL, gzipBytes, gzipParts } from '../../../src/feed/render/gzip.js'

const gzipOf = (pieces: Uint8Array[], c = new ChunkCompressor(GZIP_LEVEL, null)): Buffer => Buffer.concat(gzipParts(pieces, c).map((p) => p.bytes))

t.test('gunzip(gzip(x)) = x for any split of any bytes (zlib as the oracle)', async () => {
  await fc.assert(fc.property(fc.uint8Array({ maxLength: 5000 }), fc.array(fc.nat(), { maxLength: 6 }), (bytes, cuts) => {
    const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
    const pieces: Uint8Array[] = []
    let start = 0
    for (const p of points) { pieces.push(bytes.subarray(start, p)); start = p }
    pieces.push(bytes.subarray(start))
    return gunzipSync(gzipOf(pieces)).equals(Buffer.from(bytes))
  }), { numRuns: 100 })
})

t.test('the empty body gzips to a valid empty member', async (t) => {
  const g = gzipOf([])
  t.equal(gunzipSync(g).length, 0)
  t.equal(g.length, 10 + 2 + 8)
})

t.test('deterministic: fixed header (mtime 0, XFL 0, OS 255), same bytes every time', async (t) => {
  const body = Buffer.from('10.0.0.0/8\n'.repeat(5000))
  const a = gzipBytes(body)
  const b = gzipBytes(Buffer.from(body))
  t.same(Buffer.from(a), Buffer.from(b))
  t.same([...a.subarray(0, 10)], [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])
  const trailer = Buffer.from(a.subarray(a.length - 8))
  t.equal(trailer.readUInt32LE(4), body.length, 'ISIZE')
})

t.test('chunks are compressed once and reused by content across builds', async (t) => {
  const chunk = (i: number): Uint8Array => Buffer.from(`${i}.0.0.0/8\n`.repeat(300))
  const first = new ChunkCompressor(GZIP_LEVEL, null)
  const g1 = gzipOf([chunk(1), chunk(2), chunk(3)], first)
  // The same chunk used by a second body in the same build is not compressed again.
  gzipOf([chunk(1), chunk(2)], first)
  t.equal(first.compressed, 3)
  const second = new ChunkCompressor(GZIP_LEVEL, first.exportCache())
  const g2 = gzipOf([chunk(1), chunk(9), chunk(3)], second)
  t.equal(second.compressed, 1, 'only the changed chunk is compressed')
  t.equal(second.reused, 2)
  t.equal(gunzipSync(g2).toString(), Buffer.concat([chunk(1), chunk(9), chunk(3)]).toString())
  t.not(g1.toString('hex'), g2.toString('hex'))
  // Only what this build used is kept: chunk 2 is gone.
  t.equal(second.exportCache().keys.length, 3)
  const third = new ChunkCompressor(GZIP_LEVEL, second.exportCache())
  gzipOf([chunk(2)], third)
  t.equal(third.compressed, 1)
})

t.test('a reused chunk gives the bytes a fresh compression gives', async (t) => {
  const pieces = [Buffer.from('192.0.2.1/32\n'.repeat(200)), Buffer.from('2001:db8::/32\n'.repeat(200))]
  const fresh = gzipOf(pieces)
  const warm = new ChunkCompressor(GZIP_LEVEL, null)
  gzipOf(pieces, warm)
  t.same(gzipOf(pieces, new ChunkCompressor(GZIP_LEVEL, warm.exportCache())), fresh)
})

t.test('crc32Combine agrees with zlib on the concatenation', async () => {
  await fc.assert(fc.property(fc.uint8Array({ maxLength: 3000 }), fc.uint8Array({ maxLength: 3000 }), (a, b) =>
    crc32Combine(crc32(a), crc32(b), b.length) === crc32(Buffer.concat([a, b]))), { numRuns: 200 })
})
