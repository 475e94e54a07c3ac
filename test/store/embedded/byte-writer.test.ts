/**
 * ByteWriter's hand-over to lmdb-js: a value given in place (lmdbValue) is stored as exactly the
 * bytes written since reset() — never the longer value that was in the buffer before, never a
 * stale copy after the buffer grew — and copy() writes the bytes it is given, across growth.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { open } from 'lmdb'
import t from 'tap'
import { ByteWriter } from '../../../src/store/embedded/byte-writer.js'

t.test('lmdbValue stores the bytes since reset(), whatever the buffer held or became', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-byte-writer-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const root = open({ path: dir, maxDbs: 1 })
  t.teardown(() => root.close())
  const db = root.openDB<Buffer, string>({ name: 'values', encoding: 'binary' })
  // Long, then short, then long enough to make the buffer grow: each must come back alone.
  const cases: Array<[string, Buffer]> = [
    ['long first', Buffer.alloc(300, 0xaa)],
    ['short after long', Buffer.from([1, 2, 3])],
    ['empty', Buffer.alloc(0)],
    ['past the first buffer', Buffer.alloc(200_000, 0x5c)],
    ['short after growth', Buffer.from('tail')],
  ]
  const w = new ByteWriter(1024)
  await root.transaction(() => {
    for (const [key, bytes] of cases) {
      w.reset()
      w.bytes(bytes)
      db.putSync(key, w.lmdbValue())
    }
  })
  for (const [key, bytes] of cases) t.same(db.getBinary(key), bytes, key)
})

t.test('copy writes the given range and grows the buffer when it must', async (t) => {
  const src = Buffer.from(Array.from({ length: 64 }, (_, i) => i))
  const cases: Array<[string, number, number, number]> = [
    // name, bytes already written, from, length
    ['at the start', 0, 0, 16],
    ['from the middle', 5, 20, 16],
    ['nothing', 3, 10, 0],
    ['across growth', 14, 40, 16],
  ]
  for (const [name, before, at, length] of cases) {
    const w = new ByteWriter(16)
    for (let i = 0; i < before; i++) w.u8(0xff)
    w.copy(src, at, length)
    t.equal(w.pos, before + length, `${name}: position`)
    t.same(w.view().subarray(before), src.subarray(at, at + length), `${name}: bytes`)
    t.same(w.view().subarray(0, before), Buffer.alloc(before, 0xff), `${name}: what was there`)
  }
})
