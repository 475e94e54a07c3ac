import t from 'tap'
import { countPrefixes, emptyPrefixes, writePrefixLines } from '../../src/net/packed.js'
import { TextWriter } from '../../src/net/text-writer.js'

t.test('PackedPrefixes helpers', async (t) => {
  const empty = emptyPrefixes()
  t.equal(countPrefixes(empty), 0)
  const p = { v4: new Uint32Array([0x0a000000, 8, 0xc0000201, 32]), v6: new Uint32Array([0x20010db8, 0, 0, 0, 32]) }
  t.equal(countPrefixes(p), 3)
  const w = new TextWriter()
  writePrefixLines(p, w)
  t.equal(Buffer.from(w.finish()).toString(), '10.0.0.0/8\n192.0.2.1/32\n2001:db8::/32\n')
})
