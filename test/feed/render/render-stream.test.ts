import t from 'tap'
import { createHash } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { computeNetworks } from '../../../src/feed/render/compute-networks.js'
import { renderStream } from '../../../src/feed/render/render-stream.js'
import { SOURCE_CHUNK, type ActionNetworks, type ChunkCache, type RenderResult, type RenderTask, type RenderedRepresentation, type TargetGroup, type WireFamily, type WireFormat, type WireStream } from '../../../src/pool/protocol.js'

function group (ips: string[], extra: Partial<TargetGroup> = {}): TargetGroup {
  return { confidence: 'high', severity: 'high', ips: ips.map((i) => i + '\n').join(''), asns: [], countries: [], ...extra }
}
function networks (groups: TargetGroup[]): ActionNetworks {
  return computeNetworks({ geo: { version: 0 }, block: groups, allow: [], carve: group([]), meta: '' }, null).block
}
const GENERATED = Date.UTC(2025, 4, 6, 7, 8, 9, 999)
function render (stream: WireStream, n: ActionNetworks, over: Partial<RenderTask> = {}): RenderResult {
  return renderStream({
    stream, action: 'block', networks: n, name: 'edge firewalls', description: 'Blocked by the SOC', generated: { v4: GENERATED, v6: GENERATED - 1000, both: GENERATED + 1000 },
    limit: 131072, listFeed: true, gzipLevel: 6, cache: null, ...over,
  })
}
/** The compressed chunks of a result, in chunkKeys order (as build-snapshot.ts resolves them). */
function chunksOf (r: RenderResult, previous: ChunkCache | null = null): Uint8Array[] {
  return r.chunkKeys.map((key) => {
    const i = r.fresh.keys.indexOf(key)
    if (i >= 0) return r.fresh.bytes.slice(r.fresh.offsets[i]!, r.fresh.offsets[i + 1]!)
    const j = previous?.keys.indexOf(key) ?? -1
    if (j < 0) throw new Error(`chunk ${key} neither fresh nor cached`)
    return previous!.chunks[j]!
  })
}
/** What the main thread keeps of a result for the next build of the feed. */
function cacheOf (r: RenderResult, previous: ChunkCache | null = null): ChunkCache {
  return { keys: r.chunkKeys, chunks: chunksOf(r, previous), text: { key: r.textKey, bytes: new Uint8Array(r.text), pieces: r.textPieces } }
}
/** A representation's bytes from its spans (as build-snapshot.ts assembles them). */
function bytesOf (r: RenderResult, rep: RenderedRepresentation, previous: ChunkCache | null = null): Buffer {
  const chunks = chunksOf(r, previous)
  const sources = [Buffer.from(r.text), Buffer.from(r.local)]
  const parts: Buffer[] = []
  for (let k = 0; k < rep.spans.length; k += 3) {
    if (rep.spans[k] === SOURCE_CHUNK) parts.push(Buffer.from(chunks[rep.spans[k + 1]!]!))
    else parts.push(sources[rep.spans[k]!]!.subarray(rep.spans[k + 1]!, rep.spans[k + 1]! + rep.spans[k + 2]!))
  }
  const out = Buffer.concat(parts)
  if (out.length !== rep.length) throw new Error(`spans give ${out.length} bytes, length says ${rep.length}`)
  return out
}
function body (r: RenderResult, format: WireFormat, family: WireFamily, checksum = false, enc: 'identity' | 'gzip' = 'identity', previous: ChunkCache | null = null): Buffer {
  const v = r.variants.find((x) => x.format === format && x.family === family && x.checksum === checksum)
  if (v === undefined) throw new Error(`no variant ${format} ${family}`)
  return bytesOf(r, v[enc], previous)
}
const text = (r: RenderResult, format: WireFormat, family: WireFamily): string => body(r, format, family).toString()

const SAMPLE = networks([group(['198.51.100.0/24', '192.0.2.1', '2001:db8::/32', '2001:db8:1:0:0:0:0:1'])])

t.test('plain: one CIDR per line, IPv4 first, every line ends in \\n', async (t) => {
  const r = render('lines', SAMPLE)
  t.equal(text(r, 'plain', 'v4'), '192.0.2.1/32\n198.51.100.0/24\n')
  t.equal(text(r, 'plain', 'v6'), '2001:db8::/32\n')
  t.equal(text(r, 'plain', 'both'), '192.0.2.1/32\n198.51.100.0/24\n2001:db8::/32\n')
})

t.test('dialect_a: the six header lines, generated = Last-Modified of that family, then the networks', async (t) => {
  const r = render('lines', SAMPLE)
  t.equal(text(r, 'dialect_a', 'v4'), [
    '# edge firewalls', '# Blocked by the SOC', '# action: block', '# family: v4', '# generated: 2025-05-06T07:08:09Z', '# entries: 2',
    '192.0.2.1/32', '198.51.100.0/24', '',
  ].join('\n'))
  t.equal(text(r, 'dialect_a', 'both'), [
    '# edge firewalls', '# Blocked by the SOC', '# action: block', '# family: both', '# generated: 2025-05-06T07:08:10Z', '# entries: 3',
    '192.0.2.1/32', '198.51.100.0/24', '2001:db8::/32', '',
  ].join('\n'))
  t.match(text(r, 'dialect_a', 'v6'), /^# edge firewalls\n# Blocked by the SOC\n# action: block\n# family: v6\n# generated: 2025-05-06T07:08:08Z\n# entries: 1\n2001:db8::\/32\n$/)
  const empty = render('lines', networks([]), { name: 'acme', description: 'All access rules', action: 'allow' })
  t.equal(text(empty, 'dialect_a', 'v6'), '# acme\n# All access rules\n# action: allow\n# family: v6\n# generated: 2025-05-06T07:08:08Z\n# entries: 0\n')
  const control = render('lines', SAMPLE, { name: 'a\nb', description: 'c\rd' })
  t.match(text(control, 'dialect_a', 'v4'), /^# a b\n# c d\n/, 'a stray control character cannot split the header')
})

t.test('dialect_b: CSV without header; labels per group; entries = rows', async (t) => {
  const n = networks([
    group(['192.0.2.0/24', '2001:db8::1'], { confidence: 'medium', severity: 'low' }),
    group(['192.0.2.128/25'], { confidence: 'high', severity: 'critical' }),
  ])
  const r = render('rows', n)
  t.equal(text(r, 'dialect_b', 'v4'), '192.0.2.0-192.0.2.255,IP Range,medium,low\n192.0.2.128-192.0.2.255,IP Range,high,critical\n')
  t.equal(text(r, 'dialect_b', 'v6'), '2001:db8::1,IP,medium,low\n')
  t.equal(text(r, 'dialect_b', 'both'), text(r, 'dialect_b', 'v4') + text(r, 'dialect_b', 'v6'))
  t.same(r.variants.filter((v) => !v.checksum).map((v) => [v.family, v.entries]), [['v4', 2], ['v6', 1], ['both', 3]])
})

t.test('nftables: one element line per family, no variant for both, empty body without networks', async (t) => {
  const r = render('nft', SAMPLE)
  t.equal(text(r, 'nftables', 'v4'), 'elements = { 192.0.2.1/32, 198.51.100.0/24 }\n')
  t.equal(text(r, 'nftables', 'v6'), 'elements = { 2001:db8::/32 }\n')
  t.notOk(r.variants.some((v) => v.family === 'both'))
  const none = render('nft', networks([group(['192.0.2.1'])]))
  t.equal(text(none, 'nftables', 'v6'), '')
})

const nft = spawnSync('nft', ['--version']).status === 0
t.test('every non-empty nftables body loads with `nft -c` into a flags-interval set of its family', { skip: nft ? false : 'nft not installed' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-nft-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  let seed = 99
  const rand = (): number => { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; return seed }
  const randomV4 = Array.from({ length: 3000 }, () => { const a = rand(); return `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}/${8 + (rand() % 25)}` })
  const randomV6 = Array.from({ length: 500 }, () => `2001:db8:${(rand() & 0xffff).toString(16)}:${(rand() & 0xffff).toString(16)}::/${32 + (rand() % 97)}`)
  const cases = [
    { description: 'hosts and adjacent non-mergeable prefixes', ips: ['10.0.0.0/24', '10.0.1.0/25', '10.0.1.128/32', '192.0.2.1', '2001:db8::1', '2001:db8::2/127', '2001:db8::4/126'] },
    { description: 'edges of the address space', ips: ['0.0.0.0/8', '255.255.255.255', '::/12', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'] },
    { description: 'random prefixes, coalesced', ips: [...randomV4, ...randomV6] },
  ]
  for (const c of cases) {
    const r = render('nft', networks([group(c.ips)]))
    for (const [family, type] of [['v4', 'ipv4_addr'], ['v6', 'ipv6_addr']] as const) {
      const b = text(r, 'nftables', family)
      t.ok(b.length > 0, `${c.description} ${family}: has networks`)
      const file = join(dir, `${family}.nft`)
      writeFileSync(file, `table inet t {\n  set s {\n    type ${type}; flags interval;\n    ${b}  }\n}\n`)
      const run = spawnSync('nft', ['-c', '-f', file], { encoding: 'utf8' })
      t.equal(run.status, 0, `${c.description} ${family}: nft -c ${run.stderr.slice(0, 300)}`)
    }
  }
})

t.test('checksum variants: 32 lowercase hex MD5 of the uncompressed body, for every dialect', async (t) => {
  for (const stream of ['lines', 'rows', 'nft'] as const) {
    const r = render(stream, SAMPLE)
    for (const v of r.variants.filter((x) => !x.checksum)) {
      const md5 = body(r, v.format, v.family, true).toString()
      t.match(md5, /^[0-9a-f]{32}$/)
      t.equal(md5, createHash('md5').update(body(r, v.format, v.family)).digest('hex'), `${v.format} ${v.family}`)
    }
  }
})

t.test('gunzip(gzip body) = identity body for every variant; ETags differ per variant and encoding', async (t) => {
  const tags = new Set<string>()
  let count = 0
  for (const stream of ['lines', 'rows', 'nft'] as const) {
    const r = render(stream, SAMPLE)
    for (const v of r.variants) {
      t.same(gunzipSync(body(r, v.format, v.family, v.checksum, 'gzip')), body(r, v.format, v.family, v.checksum), `${v.format} ${v.family} ${v.checksum}`)
      t.match(v.identity.etag, /^"[a-z_0-9]+\.(v4|v6|both)\.block(\.md5)?\.identity\.[A-Za-z0-9_-]{22}"$/)
      t.match(v.gzip.etag, /^"[a-z_0-9]+\.(v4|v6|both)\.block(\.md5)?\.gzip\.[A-Za-z0-9_-]{27}"$/)
      tags.add(v.identity.etag).add(v.gzip.etag)
      count += 2
    }
  }
  t.equal(tags.size, count, 'no two representations share a tag')
  const again = render('lines', networks([group(['2001:db8::/32', '192.0.2.1', '198.51.100.0/24'])]))
  t.same(again.variants.map((v) => v.identity.etag), render('lines', SAMPLE).variants.map((v) => v.identity.etag), 'same bytes → same tags')
})

t.test('over the entry cap: the 413 body, never a network, for the variant and its checksum', async (t) => {
  const r = render('lines', SAMPLE, { limit: 2 })
  const byKey = new Map(r.variants.map((v) => [`${v.format}|${v.family}|${v.checksum}`, v]))
  t.equal(byKey.get('plain|v4|false')!.status, 200, '2 entries under a cap of 2')
  t.equal(byKey.get('plain|v6|false')!.status, 200)
  for (const key of ['plain|both|false', 'plain|both|true', 'dialect_a|both|false', 'dialect_a|both|true']) {
    const v = byKey.get(key)!
    t.equal(v.status, 413, key)
    t.equal(v.entries, 3)
    const b = bytesOf(r, v.identity).toString()
    t.same(JSON.parse(b), { success: false, error: 'feed exceeds its entry limit', details: { entries: 3, limit: 2, hint: "ask for family=v4 or family=v6, or raise the list's max_entries" } })
    t.notMatch(gunzipSync(bytesOf(r, v.gzip)).toString(), /\d+\.\d+\.\d+\.\d+|::/)
  }
  const rows = render('rows', SAMPLE, { limit: 1, listFeed: false })
  const v4 = rows.variants.find((v) => v.family === 'v4' && !v.checksum)!
  t.equal(v4.status, 413)
  t.equal(JSON.parse(bytesOf(rows, v4.identity).toString()).details.hint, 'publish it through a list with a higher max_entries')
})

t.test('bodies are written once: plain bodies are views of the shared text, dialect_a adds only its header', async (t) => {
  const r = render('lines', SAMPLE)
  const find = (format: WireFormat, family: WireFamily): RenderedRepresentation => r.variants.find((v) => v.format === format && v.family === family && !v.checksum)!.identity
  t.same(find('plain', 'v4').spans.slice(0, 2), [0, 0], 'plain v4 is the start of the text')
  t.equal(find('plain', 'both').spans.length, 3, 'one span')
  t.equal(find('plain', 'both').spans[1], find('plain', 'v4').spans[1], 'both starts where v4 does')
  t.equal(find('plain', 'both').key, null, 'a view needs no content key')
  t.equal(find('dialect_a', 'v4').spans.length, 6, 'its header (local), then the shared v4 lines')
  t.equal(find('dialect_a', 'v4').spans[3], 0, 'the lines are the text')
  t.equal(find('dialect_a', 'v4').spans[4], find('plain', 'v4').spans[1])
  t.match(find('dialect_a', 'v4').key, /^i:/, 'a body of several spans has a content key')
  t.equal(find('dialect_a', 'both').spans.length, 6)
  t.ok(r.text instanceof SharedArrayBuffer, 'the text is shared memory: the next build gets it without a copy')
  const ips = Array.from({ length: 20_000 }, (_, i) => `10.${i >> 8}.${i & 255}.${i % 7}`)
  const big = render('lines', networks([group(ips)]))
  const lines = body(big, 'plain', 'both').length
  t.equal(big.text.byteLength, lines, 'the text holds the lines once and nothing else')
  t.ok(big.local.byteLength < 4096, `the feed's own bytes are small (${big.local.byteLength} B)`)
  t.ok(big.fresh.bytes.length < lines, 'gzip bodies are spans of the compressed chunks')
  t.equal(new Set(big.textPieces.keys).size, big.textPieces.keys.length)
  t.equal(big.textPieces.offsets[big.textPieces.offsets.length - 1], lines)
})

t.test('feeds with the same networks get the same text and text key, whatever their name or labels', async (t) => {
  const ips = ['192.0.2.0/24', '198.51.100.7', '2001:db8::/48']
  const a = render('lines', networks([group(ips)]), { name: 'a', generated: { v4: 0, v6: 0, both: 0 } })
  const b = render('lines', networks([group(ips, { confidence: 'low' })]), { name: 'b', action: 'allow' })
  t.equal(a.textKey, b.textKey)
  t.same(Buffer.from(a.text), Buffer.from(b.text))
  t.not(render('rows', networks([group(ips)])).textKey, render('rows', networks([group(ips, { confidence: 'low' })])).textKey, 'dialect_b rows carry the labels')
  t.not(a.textKey, render('lines', networks([group([...ips, '203.0.113.9'])])).textKey)
})

t.test('a rebuild with one more network recompresses and rewrites few chunks and gives the fresh bytes', async (t) => {
  let seed = 5
  const ips = Array.from({ length: 30_000 }, () => { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; return `${seed >>> 24}.${(seed >>> 16) & 255}.${(seed >>> 8) & 255}.${seed & 255}` })
  const more = networks([group([...ips, '203.0.113.77', '2001:db8::7'])])
  for (const stream of ['lines', 'rows', 'nft'] as const) {
    const first = render(stream, networks([group(ips)]))
    const previous = cacheOf(first)
    const warm = render(stream, more, { cache: previous })
    const cold = render(stream, more)
    t.ok(warm.fresh.keys.length <= 3, `${stream}: ${warm.fresh.keys.length} of ${warm.chunkKeys.length} chunks compressed again`)
    t.same(Buffer.from(warm.text), Buffer.from(cold.text), `${stream}: reusing chunks changes no byte of the text`)
    t.equal(warm.textKey, cold.textKey)
    t.same(warm.textPieces, cold.textPieces)
    t.same(warm.variants.map((v) => [v.identity.etag, v.gzip.etag]), cold.variants.map((v) => [v.identity.etag, v.gzip.etag]), `${stream}: same tags`)
    for (const v of warm.variants) {
      t.same(bytesOf(warm, v.gzip, previous), bytesOf(cold, cold.variants.find((c) => c.format === v.format && c.family === v.family && c.checksum === v.checksum)!.gzip), `${stream} ${v.format} ${v.family} ${v.checksum}: same gzip bytes`)
    }
  }
})

t.test('unchanged chunks of text are taken from the previous build, not written again', async (t) => {
  const ips = Array.from({ length: 12_000 }, (_, i) => `10.${i >> 8}.${i & 255}.1`)
  const first = render('lines', networks([group(ips)]))
  const previous = cacheOf(first)
  // Mark the previous text: every chunk the rebuild takes from it shows the mark.
  const marked = new Uint8Array(previous.text!.bytes.length).fill(0x23)
  const warm = render('lines', networks([group([...ips, '192.0.2.1'])]), { cache: { ...previous, text: { key: previous.text!.key, bytes: marked, pieces: previous.text!.pieces } } })
  const text = Buffer.from(warm.text).toString()
  t.match(text, /^#+\n?/, 'the chunks before the change were copied')
  t.match(text, /192\.0\.2\.1\/32\n/, 'the changed chunk was written')
})

t.test('the same text again (another feed, or a header-only change) is the previous buffer itself', async (t) => {
  const n = networks([group(Array.from({ length: 5000 }, (_, i) => `10.0.${i >> 8}.${i & 255}`))])
  for (const stream of ['lines', 'rows', 'nft'] as const) {
    const first = render(stream, n)
    const again = render(stream, n, { name: 'another list', cache: cacheOf(first) })
    t.equal(again.text, first.text, `${stream}: no copy, no new buffer`)
    t.equal(again.fresh.keys.length, 0, `${stream}: nothing compressed again`)
  }
})
