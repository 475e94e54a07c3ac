import t from 'tap'
import fc from 'fast-check'
import { INTERVAL_WORDS, scanCidr, scanRange } from '../../src/net/cidr.js'
import { NetworkSetBuilder, type FamilyFilter, type NetworkSet } from '../../src/net/network-set.js'
import { LineScanner, scanLines } from '../../src/net/scan-lines.js'
import { formatV4, formatV6, netArb, wordsOf } from './oracle.js'

interface Scanned { set: NetworkSet, invalid: { line: number, text: string }[], entries: number }

function scan (text: string, family: FamilyFilter = 'both'): Scanned {
  const bytes = Buffer.from(text, 'latin1')
  const b = new NetworkSetBuilder(4, 4)
  const invalid: { line: number, text: string }[] = []
  const r = scanLines(bytes, b, (line, start, end) => invalid.push({ line, text: bytes.toString('latin1', start, end) }), family)
  if (r.invalid !== invalid.length) throw new Error(`scanLines counted ${r.invalid} invalid lines, reported ${invalid.length}`)
  return { set: b.build(), invalid, entries: r.entries }
}

/**
 * The grammar of scan-lines.ts written out with string methods, one line at a time: the fast
 * byte path must give the same result as this on every input.
 */
function reference (text: string, family: FamilyFilter = 'both'): Scanned {
  const b = new NetworkSetBuilder(4, 4)
  const invalid: { line: number, text: string }[] = []
  let entries = 0
  const out = new Uint32Array(INTERVAL_WORDS)
  const rows = text.split('\n')
  if (rows[rows.length - 1] === '') rows.pop()
  rows.forEach((raw, i) => {
    const hash = raw.indexOf('#')
    const entry = (hash >= 0 ? raw.slice(0, hash) : raw).replace(/[ \t\r]+$/, '').replace(/^[ \t]+/, '')
    if (entry === '') return
    entries++
    const f = entry.includes('-') ? scanRange(entry, 0, entry.length, out, true) : scanCidr(entry, 0, entry.length, out)
    if (f === 0) invalid.push({ line: i + 1, text: entry })
    else if (family === 'both' || (family === 'v4') === (f === 4)) b.addScanned(f, out)
  })
  return { set: b.build(), invalid, entries }
}

const cases: { description: string, input: string, lines: string, invalid?: number[] }[] = [
  { description: 'addresses, CIDRs and ranges', input: '10.0.0.0/25\n10.0.0.128-10.0.0.255\n2001:db8::1\n', lines: '10.0.0.0/24\n2001:db8::1/128\n' },
  { description: 'no final newline', input: '10.0.0.1', lines: '10.0.0.1/32\n' },
  { description: 'CRLF', input: '10.0.0.1\r\n2001:db8::/32\r\n', lines: '10.0.0.1/32\n2001:db8::/32\n' },
  { description: 'comments and blank lines', input: '# list\n\n10.0.0.1 # a host\n   \n\t# indented comment\n', lines: '10.0.0.1/32\n' },
  { description: 'indentation and trailing blanks', input: '  10.0.0.1  \n\t::1\t\n', lines: '10.0.0.1/32\n::1/128\n' },
  { description: 'blanks around a range dash', input: '10.0.0.0 - 10.0.0.3\n', lines: '10.0.0.0/30\n' },
  { description: 'mapped IPv6 is IPv4', input: '::ffff:10.0.0.1\n::ffff:a00:2/127\n', lines: '10.0.0.1/32\n10.0.0.2/31\n' },
  { description: 'host bits set', input: '10.1.2.3/8\n2001:db8::1/32\n', lines: '10.0.0.0/8\n2001:db8::/32\n' },
  { description: 'bad lines are reported with their numbers', input: '10.0.0.1\n010.0.0.1\n\n1.2.3.4/33\nfe80::1%eth0\n::1\n', lines: '10.0.0.1/32\n::1/128\n', invalid: [2, 4, 5] },
  { description: 'a lone CR is not a line end', input: '10.0.0.1\r10.0.0.2\n', lines: '', invalid: [1] },
  { description: 'UTF-8 is refused, not misread', input: Buffer.from('10.0.0.1\u00a0\n').toString('latin1'), lines: '', invalid: [1] },
  { description: 'NUL', input: '10.0.0.1\u0000\n', lines: '', invalid: [1] },
  { description: 'empty input', input: '', lines: '' },
  { description: 'only a newline', input: '\n', lines: '' },
]

t.test('scanLines examples', async (t) => {
  for (const c of cases) {
    const r = scan(c.input)
    t.equal(r.set.toLines(), c.lines, c.description)
    t.same(r.invalid.map((x) => x.line), c.invalid ?? [], `${c.description}: invalid lines`)
  }
})

t.test('refused entries are reported trimmed, at their byte offsets', async (t) => {
  t.same(scan('ok\n  1.2.3.4/33  # comment\r\n').invalid, [{ line: 1, text: 'ok' }, { line: 2, text: '1.2.3.4/33' }])
})

t.test('family filter', async (t) => {
  const input = '10.0.0.1\n2001:db8::1\nbad\n'
  t.equal(scan(input, 'v4').set.toLines(), '10.0.0.1/32\n')
  t.equal(scan(input, 'v6').set.toLines(), '2001:db8::1/128\n')
  t.equal(scan(input, 'v6').invalid.length, 1, 'invalid lines are reported whatever the family')
  t.equal(scan(input, 'v4').entries, 3)
})

/** Many spellings of one network: the fast path must take or decline each consistently. */
const spelled = fc.tuple(netArb, fc.nat(7), fc.constantFrom('', ' ', '\t', '\r', ' # c', '#', '  \r')).map(([n, style, tail]) => {
  const full = (x: bigint): string => wordsOf(x).flatMap((w) => [w >>> 16, w & 0xffff]).map((g) => g.toString(16).padStart(style & 1 ? 4 : 1, '0')).join(':')
  const fmt = n.family === 4 ? formatV4 : (x: bigint) => (style & 2 ? full(x) : formatV6(x))
  const size = n.last - n.first + 1n
  const bits = size.toString(2).length - 1
  const text = (size & (size - 1n)) === 0n && n.first % size === 0n
    ? `${fmt(n.first)}${style & 4 && bits === 0 ? '' : `/${(n.family === 4 ? 32 : 128) - bits}`}`
    : `${fmt(n.first)}${style & 4 ? ' - ' : '-'}${fmt(n.last)}`
  return (style & 1 ? text.toUpperCase() : text) + tail
})

const ALPHABET = '0123456789abcdefABCDEF:./-# \t\r%x'.split('')

/** Noise from the characters the grammar cares about. */
const noise = fc.string({ unit: fc.constantFrom(...ALPHABET), maxLength: 44 })

/** A valid line with one or two small edits: where a fast path and a slow path would part. */
const edit = fc.tuple(fc.nat(), fc.constantFrom(...ALPHABET, ''), fc.nat(1))
const mutated = fc.tuple(spelled, edit, fc.option(edit)).map(([line, ...edits]) => {
  let s = line
  for (const e of edits) {
    if (e === null) continue
    const [at, ch, drop] = e
    const i = at % (s.length + 1)
    s = s.slice(0, i) + ch + s.slice(i + drop)
  }
  return s
})

t.test('the fast byte path agrees with the string grammar on every line', async () => {
  fc.assert(fc.property(fc.array(fc.oneof(spelled, mutated, noise), { maxLength: 30 }), fc.constantFrom<FamilyFilter>('both', 'v4', 'v6'), (rows, family) => {
    const text = rows.join('\n') + (rows.length % 2 === 0 ? '\n' : '')
    const got = scan(text, family)
    const want = reference(text, family)
    return got.set.equals(want.set) && got.entries === want.entries && JSON.stringify(got.invalid) === JSON.stringify(want.invalid)
  }), { numRuns: 1000 })
})

/** LineScanner over `text` cut at `cuts`, each chunk copied into one reused buffer as a reader would. */
function scanChunked (text: string, cuts: number[], family: FamilyFilter): Scanned {
  const bytes = Buffer.from(text, 'latin1')
  const b = new NetworkSetBuilder(4, 4)
  const invalid: { line: number, text: string }[] = []
  const scanner = new LineScanner(b, (line, start, end, chunk) => {
    invalid.push({ line, text: Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('latin1', start, end) })
  }, family)
  const reused = Buffer.alloc(bytes.length + 1)
  const points = [...new Set([0, ...cuts.map((c) => c % (bytes.length + 1)), bytes.length])].sort((x, y) => x - y)
  for (let k = 1; k < points.length; k++) {
    const piece = bytes.subarray(points[k - 1], points[k])
    piece.copy(reused)
    scanner.push(reused.subarray(0, piece.length))
    reused.fill(0x78) // what a later read would leave there
  }
  const r = scanner.end()
  if (r.invalid !== invalid.length) throw new Error(`LineScanner counted ${r.invalid} invalid lines, reported ${invalid.length}`)
  return { set: b.build(), invalid, entries: r.entries }
}

t.test('LineScanner gives what scanLines gives, wherever the chunks are cut', async () => {
  fc.assert(fc.property(fc.array(fc.oneof(spelled, mutated, noise), { maxLength: 30 }), fc.array(fc.nat(), { maxLength: 12 }), fc.constantFrom<FamilyFilter>('both', 'v4', 'v6'), (rows, cuts, family) => {
    const text = rows.join('\n') + (rows.length % 2 === 0 ? '\n' : '')
    const got = scanChunked(text, cuts, family)
    const want = scan(text, family)
    return got.set.equals(want.set) && got.entries === want.entries && JSON.stringify(got.invalid) === JSON.stringify(want.invalid)
  }), { numRuns: 1000 })
})

t.test('LineScanner: a line longer than any chunk, and one-byte chunks', async (t) => {
  const text = `10.0.0.1\n${' '.repeat(5000)}10.0.0.2\nbad${'x'.repeat(3000)}\n2001:db8::/32`
  const every = Array.from({ length: text.length }, (_, i) => i)
  for (const cuts of [[7, 4000, 4010, 8020], every]) {
    const r = scanChunked(text, cuts, 'both')
    t.equal(r.set.toLines(), '10.0.0.1/32\n10.0.0.2/32\n2001:db8::/32\n')
    t.same(r.invalid.map((x) => x.line), [3])
    t.equal(r.entries, 4)
  }
})
