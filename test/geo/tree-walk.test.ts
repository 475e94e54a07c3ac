import assert from 'node:assert'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { Reader, type Response } from 'mmdb-lib'
import { openMmdb } from '../../src/geo/mmdb-file.js'
import { walkSearchTree } from '../../src/geo/tree-walk.js'
import { formatIpv4, formatIpv6 } from '../../src/net/ip.js'
import { IPV4_SPACES_IN_V6, maxmind, prefixesOverlap } from './fixtures.js'

interface Leaf { text: string, family: 4 | 6, len: number, data: number, words: number[] }

function leavesOf (file: string): { leaves: Leaf[], nodes: number, nodeCount: number } {
  const mm = openMmdb(readFileSync(maxmind(file)))
  const leaves: Leaf[] = []
  const stats = walkSearchTree(mm, {
    v4: (addr, len, data) => leaves.push({ text: formatIpv4(addr), family: 4, len, data, words: [0, 0, 0, addr] }),
    v6: (w, len, data) => leaves.push({ text: formatIpv6(w), family: 6, len, data, words: Array.from(w) }),
  })
  return { leaves, nodes: stats.nodes, nodeCount: mm.metadata.nodeCount }
}

// MaxMind's "Test" databases hold records like {ip: "::1.1.1.1"}; they are the record-size
// fixtures (the same networks in 24-, 28- and 32-bit trees) and the IPv4-only tree.
for (const file of ['MaxMind-DB-test-mixed-24.mmdb', 'MaxMind-DB-test-mixed-28.mmdb', 'MaxMind-DB-test-mixed-32.mmdb', 'MaxMind-DB-test-ipv4-24.mmdb']) {
  t.test(`${file}: every network the walk reports is what mmdb-lib answers for it`, async (t) => {
    const buf = readFileSync(maxmind(file))
    const mm = openMmdb(buf)
    const reader = new Reader<Response>(buf)
    const { leaves, nodes, nodeCount } = leavesOf(file)
    t.equal(nodes, nodeCount, 'every node entered exactly once')
    t.ok(leaves.length > 0, `${leaves.length} networks`)
    for (const leaf of leaves) {
      const [record, len] = reader.getWithPrefixLength(leaf.text)
      assert.deepEqual(record, mm.data.decode(leaf.data), `${leaf.text}/${leaf.len}: record`)
      assert.equal(len, leaf.len, `${leaf.text}: prefix length`)
    }
    t.pass('records and prefix lengths agree with mmdb-lib')
    for (const leaf of leaves.filter((l) => l.family === 6)) {
      for (const s of IPV4_SPACES_IN_V6) {
        if (prefixesOverlap(leaf.words, 0, leaf.len, s.words, s.len)) t.fail(`${leaf.text}/${leaf.len} overlaps ${s.name}`)
      }
    }
    const v4 = leaves.filter((l) => l.family === 4)
    t.same(v4.map((l) => l.words[3]), [...v4.map((l) => l.words[3]!)].sort((a, b) => a - b), 'IPv4 in address order')
  })
}

t.test('the three record sizes walk to the same networks', async (t) => {
  const strip = (f: string) => leavesOf(f).leaves.map((l) => `${l.text}/${l.len}`)
  const l24 = strip('MaxMind-DB-test-mixed-24.mmdb')
  t.same(strip('MaxMind-DB-test-mixed-28.mmdb'), l24)
  t.same(strip('MaxMind-DB-test-mixed-32.mmdb'), l24)
  // In the mixed tree IPv4 is at ::/96 and aliased three times; it is reported once, as IPv4.
  const ipv4 = strip('MaxMind-DB-test-ipv4-24.mmdb')
  t.same(l24.filter((s) => !s.includes(':')), ipv4, 'the IPv4 part equals the IPv4-only database')
})
