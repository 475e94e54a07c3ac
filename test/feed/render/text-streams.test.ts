import t from 'tap'
import fc from 'fast-check'
import { NetworkSet } from '../../../src/net/network-set.js'
import { chunksOf, CUT_EVERY, FamilyText, MAX_CHUNK, renderLines, renderNftItems, renderRows, Scratch, type TextKind, type TextStream } from '../../../src/feed/render/text-streams.js'
import type { GroupPrefixes } from '../../../src/pool/protocol.js'

const text = (s: TextStream): string => Buffer.from(s.bytes).toString()
const prefixes = (lines: string[]): { v4: Uint32Array, v6: Uint32Array } => NetworkSet.parse(lines).prefixes()
const group = (confidence: string, severity: string, lines: string[]): GroupPrefixes => ({ confidence, severity, ...prefixes(lines) })

t.test('plain lines: one CIDR per line, hosts as /32 and /128, each line ending in \\n', async (t) => {
  const cases = [
    { description: 'empty', input: [], v4: '', v6: '' },
    { description: 'hosts', input: ['192.0.2.1', '2001:db8::1'], v4: '192.0.2.1/32\n', v6: '2001:db8::1/128\n' },
    { description: 'coalesced and ordered', input: ['10.0.1.0/24', '10.0.0.0/24', '9.0.0.0/8'], v4: '9.0.0.0/8\n10.0.0.0/23\n', v6: '' },
    { description: 'RFC 5952 text', input: ['2001:DB8:0:0:1::/80', '::/12'], v4: '', v6: '::/12\n2001:db8:0:0:1::/80\n' },
  ]
  for (const c of cases) {
    const p = prefixes(c.input)
    t.equal(text(renderLines(p.v4, 4)), c.v4, `${c.description} v4`)
    t.equal(text(renderLines(p.v6, 6)), c.v6, `${c.description} v6`)
    t.equal(renderLines(p.v4, 4).count + renderLines(p.v6, 6).count, NetworkSet.parse(c.input).count(), `${c.description} count`)
  }
})

t.test('nftables items: comma-separated, no trailing separator', async (t) => {
  const p = prefixes(['10.0.0.0/8', '192.0.2.1', '2001:db8::/32', '2001:db9::1'])
  t.equal(text(renderNftItems(p.v4, 4)), '10.0.0.0/8, 192.0.2.1/32')
  t.equal(text(renderNftItems(p.v6, 6)), '2001:db8::/32, 2001:db9::1/128')
  t.equal(text(renderNftItems(new Uint32Array(0), 4)), '')
})

t.test('dialect_b rows: host → IP, wider → IP Range first-last, groups never merged, DECISIONS §5 order', async (t) => {
  const cases = [
    {
      description: 'host and range of one group',
      groups: [group('high', 'high', ['192.0.2.1', '198.51.100.0/24'])],
      v4: '192.0.2.1,IP,high,high\n198.51.100.0-198.51.100.255,IP Range,high,high\n',
    },
    {
      description: 'overlapping networks of different groups both appear, wider first at the same address',
      groups: [group('low', 'low', ['10.0.0.0/16', '10.1.0.1']), group('high', 'critical', ['10.0.0.0/8'])],
      v4: '10.0.0.0-10.255.255.255,IP Range,high,critical\n10.0.0.0-10.0.255.255,IP Range,low,low\n10.1.0.1,IP,low,low\n',
    },
    {
      description: 'the same network in two groups: group order breaks the tie',
      groups: [group('low', 'high', ['192.0.2.7']), group('medium', 'high', ['192.0.2.7'])],
      v4: '192.0.2.7,IP,low,high\n192.0.2.7,IP,medium,high\n',
    },
    {
      description: 'adjacent networks of one group coalesce',
      groups: [group('high', 'low', ['192.0.2.0/25', '192.0.2.128/25'])],
      v4: '192.0.2.0-192.0.2.255,IP Range,high,low\n',
    },
  ]
  for (const c of cases) {
    const s = renderRows(c.groups, 4)
    t.equal(text(s), c.v4, c.description)
    t.equal(s.count, c.v4.split('\n').length - 1, `${c.description}: entries are rows`)
  }
  const v6 = renderRows([group('high', 'high', ['2001:db8::1', '2001:db8:1::/48'])], 6)
  t.equal(text(v6), '2001:db8::1,IP,high,high\n2001:db8:1::-2001:db8:1:ffff:ffff:ffff:ffff:ffff,IP Range,high,high\n')
})

function randomV4 (n: number, seed: number): Uint32Array {
  let x = seed >>> 0
  const lines: string[] = []
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0
    lines.push(`${x >>> 24}.${(x >>> 16) & 255}.${(x >>> 8) & 255}.${x & 255}`)
  }
  return prefixes(lines).v4
}

t.test('chunks: the pieces are the text, cut at line ends, about CUT_EVERY lines each', async (t) => {
  const p = randomV4(40_000, 7)
  const s = renderLines(p, 4)
  const chunks = chunksOf(s)
  t.equal(Buffer.concat(chunks).toString(), text(s))
  for (const c of chunks) {
    t.equal(c[c.length - 1], 0x0a, 'every chunk ends a line')
    t.ok(Buffer.from(c).toString().split('\n').length - 1 <= MAX_CHUNK)
  }
  const average = s.count / chunks.length
  t.ok(average > CUT_EVERY / 4 && average < CUT_EVERY * 4, `average chunk ${average.toFixed(0)} lines`)
})

t.test('chunks are content-defined: inserting one network changes at most two chunks', async () => {
  const base = randomV4(20_000, 11)
  const before = new Set(chunksOf(renderLines(base, 4)).map((c) => Buffer.from(c).toString()))
  await fc.assert(fc.property(fc.integer({ min: 0, max: 0xffffffff }), (addr) => {
    const lines = text(renderLines(base, 4)).split('\n').filter(Boolean)
    lines.push(`${addr >>> 24}.${(addr >>> 16) & 255}.${(addr >>> 8) & 255}.${addr & 255}`)
    const after = chunksOf(renderLines(prefixes(lines).v4, 4)).map((c) => Buffer.from(c).toString())
    const changed = after.filter((c) => !before.has(c)).length
    return changed <= 2
  }), { numRuns: 25 })
})

t.test('FamilyText: written chunk by chunk, the text of the whole-text renderers, for every kind and family', async () => {
  const v4 = fc.tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 8, max: 32 })).map(([a, l]) => `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}/${l}`)
  const v6 = fc.tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 16, max: 128 })).map(([a, b, l]) => `2001:${a.toString(16)}::${b.toString(16)}/${l}`)
  await fc.assert(fc.property(fc.array(fc.oneof(v4, v6), { maxLength: 60 }), fc.array(v4, { maxLength: 20 }), fc.integer({ min: 1, max: 3 }), (a, b, groups) => {
    const lists = [group('high', 'low', a), group('medium', 'critical', b), group('low', 'high', a.slice(0, 5))].slice(0, groups)
    const scratch = new Scratch()
    for (const family of [4, 6] as const) {
      const cases: Array<[FamilyText, TextStream]> = [
        [new FamilyText('lines', family, lists.slice(0, 1)), renderLines(family === 4 ? lists[0]!.v4 : lists[0]!.v6, family)],
        [new FamilyText('nft', family, lists.slice(0, 1)), renderNftItems(family === 4 ? lists[0]!.v4 : lists[0]!.v6, family)],
        [new FamilyText('rows', family, lists), renderRows(lists, family)],
      ]
      for (const [text, whole] of cases) {
        scratch.reset()
        const chunks = text.ends.map((_, c) => Buffer.from(text.write(c, scratch)))
        if (!Buffer.concat(chunks).equals(Buffer.from(whole.bytes))) return false
        if (chunks.length !== chunksOf(whole).length || text.count !== whole.count) return false
      }
    }
    return true
  }), { numRuns: 100 })
})

t.test('FamilyText keys: equal keys, equal bytes — across lists, whatever the chunk\'s position', async (t) => {
  const base = randomV4(30_000, 3)
  const lines = (p: Uint32Array): string[] => text(renderLines(p, 4)).split('\n').filter(Boolean)
  const more = prefixes([...lines(base), '203.0.113.1', '1.0.0.1']).v4
  const scratch = new Scratch()
  const chunks = (kind: TextKind, p: Uint32Array, labels = group('high', 'high', [])): Map<string, string> => {
    const f = new FamilyText(kind, 4, [{ ...labels, v4: p, v6: new Uint32Array(0) }])
    return new Map(f.ends.map((_, c) => [f.key(c), Buffer.from(f.write(c, scratch)).toString()]))
  }
  for (const kind of ['lines', 'nft', 'rows'] as const) {
    scratch.reset()
    const a = chunks(kind, base)
    const b = chunks(kind, more)
    let shared = 0
    for (const [key, bytes] of b) {
      if (!a.has(key)) continue
      shared++
      t.equal(a.get(key), bytes, `${kind}: a key names one text`)
    }
    t.ok(shared >= b.size - 3, `${kind}: two added networks change at most three chunks (${b.size - shared} of ${b.size})`)
  }
  const keys = (kind: TextKind, labels: GroupPrefixes): string[] => { const f = new FamilyText(kind, 4, [{ ...labels, v4: base, v6: new Uint32Array(0) }]); return f.ends.map((_, c) => f.key(c)) }
  t.notSame(keys('rows', group('high', 'high', [])), keys('rows', group('low', 'high', [])), 'dialect_b labels are in the key')
  t.same(keys('lines', group('high', 'high', [])), keys('lines', group('low', 'high', [])), 'and not in plain text')
  t.not(keys('lines', group('high', 'high', []))[0], keys('nft', group('high', 'high', []))[0], 'kinds never share a key')
})
