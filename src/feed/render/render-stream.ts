/**
 * One render task: the dialects that share one text, for one action, every family, identity and
 * gzip, with their checksum variants.
 *
 *   stream  dialects             text (per family)                 shared by
 *   lines   plain, dialect_a     `addr/len\n`                       plain v4/v6/both, dialect_a
 *   rows    dialect_b            `value,type,confidence,severity\n` v4/v6/both
 *   nft     nftables             `a, b, c` inside `elements = { … }\n`
 *
 * Every byte is written once. The arena (transferred back) holds each text once, laid out so that
 * `both` is v4 followed by v6 and the single-family bodies are views into it; a body that is not
 * one contiguous span — a gzip body (its compressed chunks live in the chunk cache, also
 * transferred back), a dialect_a body (its header, then the shared lines) — is described by spans
 * and assembled on first use (see RenderedRepresentation.spans).
 *
 *   arena: [dialect_a header both][v4 lines][v6 lines][header v4][header v6][checksums, 413s, gzip headers/trailers]
 *                                 └──── plain both ───┘
 *   cache: [compressed chunk][compressed chunk]…   (gzip bodies are spans of it, between their header and trailer)
 *
 * A variant over the entry cap is rendered as its 413 body only (SPEC 7.2).
 */
import { createHash } from 'node:crypto'
import { SOURCE_ARENA, SOURCE_CACHE, type RenderResult, type RenderTask, type RenderedVariant, type Span, type WireFamily, type WireFormat } from '../../pool/protocol.js'
import { renderDialectAHeader } from './dialect-a.js'
import { formatEtag, toTagDigest } from './etag.js'
import { ChunkCompressor, gzipParts } from './gzip.js'
import { chunksOf, renderLines, renderNftItems, renderRows, type TextStream } from './text-streams.js'
import { renderTooLarge } from './too-large.js'

const NFT_OPEN = Buffer.from('elements = { ')
const NFT_CLOSE = Buffer.from(' }\n')

/** Collects byte pieces; each add() returns where its pieces will sit in the final buffer. */
class Arena {
  readonly #parts: Uint8Array[] = []
  #length = 0

  add (pieces: readonly Uint8Array[]): Span {
    const offset = this.#length
    for (const p of pieces) {
      if (p.length === 0) continue
      this.#parts.push(p)
      this.#length += p.length
    }
    return { offset, length: this.#length - offset }
  }

  finish (): ArrayBuffer {
    const buffer = new ArrayBuffer(this.#length)
    const out = new Uint8Array(buffer)
    let o = 0
    for (const p of this.#parts) {
      out.set(p, o)
      o += p.length
    }
    return buffer
  }
}

function md5Of (pieces: readonly Uint8Array[]): Buffer {
  const h = createHash('md5')
  for (const p of pieces) h.update(p)
  return h.digest()
}

/**
 * MD5 of v4, of v6 and of v4 followed by v6 (the `both` body), hashing v4 once: the running hash
 * is copied after v4 (the bodies of `both` and of each family share their bytes).
 */
function md5Families (c4: readonly Uint8Array[], c6: readonly Uint8Array[]): { v4: Buffer, v6: Buffer, both: Buffer } {
  const h = createHash('md5')
  for (const p of c4) h.update(p)
  const v4 = h.copy().digest()
  for (const p of c6) h.update(p)
  return { v4, v6: md5Of(c6), both: h.digest() }
}

/** A body's spans in the arena (before the gzip chunk spans are resolved to cache offsets). */
type Spans = number[]

function arenaSpans (...spans: Span[]): Spans {
  const out: Spans = []
  for (const s of spans) {
    if (s.length === 0) continue
    const n = out.length
    // Adjacent arena spans merge: a body laid out contiguously stays a single view.
    if (n > 0 && out[n - 3] === SOURCE_ARENA && out[n - 2]! + out[n - 1]! === s.offset) out[n - 1]! += s.length
    else out.push(SOURCE_ARENA, s.offset, s.length)
  }
  return out
}

interface PendingVariant extends Omit<RenderedVariant, 'gzip'> {
  gzip: { etag: string, length: number, parts: Array<{ key: string } | Span> }
}

class StreamRenderer {
  readonly arena = new Arena()
  readonly variants: PendingVariant[] = []
  readonly compressor: ChunkCompressor
  readonly #task: RenderTask

  constructor (task: RenderTask) {
    this.#task = task
    this.compressor = new ChunkCompressor(task.gzipLevel, task.cache)
  }

  get limit (): number { return this.#task.limit }

  /**
   * Records a variant and its checksum variant. `pieces` are the uncompressed body in order;
   * `identity` its spans when the caller placed the body already (shared layout), else it is
   * placed here; `md5` its digest when the caller has it.
   */
  emit (format: WireFormat, family: WireFamily, entries: number, pieces: readonly Uint8Array[], identity?: Spans, md5?: Buffer): void {
    if (entries > this.limit) {
      const body = renderTooLarge(entries, this.limit, family, this.#task.listFeed)
      const spans = arenaSpans(this.arena.add([body]))
      this.#record(format, family, false, 413, entries, [body], spans)
      this.#record(format, family, true, 413, entries, [body], spans)
      return
    }
    const digest = md5 ?? md5Of(pieces)
    this.#record(format, family, false, 200, entries, pieces, identity ?? arenaSpans(this.arena.add(pieces)), digest)
    const checksum = Buffer.from(digest.toString('hex'))
    this.#record(format, family, true, 200, entries, [checksum], arenaSpans(this.arena.add([checksum])))
  }

  #record (format: WireFormat, family: WireFamily, checksum: boolean, status: 200 | 413, entries: number, pieces: readonly Uint8Array[], identity: Spans, md5?: Buffer): void {
    const action = this.#task.action
    const digest = md5 ?? md5Of(pieces)
    let length = 0
    for (const p of pieces) length += p.length
    const gz = createHash('sha1')
    let gzLength = 0
    const parts: Array<{ key: string } | Span> = []
    for (const p of gzipParts(pieces, this.compressor)) {
      gz.update(p.bytes)
      gzLength += p.bytes.length
      parts.push(p.key !== null ? { key: p.key } : this.arena.add([p.bytes]))
    }
    this.variants.push({
      format,
      family,
      checksum,
      status,
      entries,
      identity: { etag: formatEtag(format, family, action, checksum, 'identity', toTagDigest(digest)), length, spans: identity },
      gzip: { etag: formatEtag(format, family, action, checksum, 'gzip', toTagDigest(gz.digest())), length: gzLength, parts },
    })
  }

  /** Resolves chunk keys to offsets in the exported cache. */
  finish (): RenderResult {
    const cache = this.compressor.exportCache()
    const index = new Map(cache.keys.map((k, i) => [k, i]))
    const variants: RenderedVariant[] = this.variants.map((v) => {
      const spans: Spans = []
      for (const p of v.gzip.parts) {
        if ('key' in p) {
          const i = index.get(p.key)!
          spans.push(SOURCE_CACHE, cache.offsets[i]!, cache.offsets[i + 1]! - cache.offsets[i]!)
        } else {
          spans.push(...arenaSpans(p))
        }
      }
      return { ...v, gzip: { etag: v.gzip.etag, length: v.gzip.length, spans: mergeSpans(spans) } }
    })
    return { arena: this.arena.finish(), variants, cache }
  }
}

/** Merges adjacent spans of one source. */
function mergeSpans (spans: Spans): Spans {
  const out: Spans = []
  for (let k = 0; k < spans.length; k += 3) {
    const n = out.length
    if (n > 0 && out[n - 3] === spans[k] && out[n - 2]! + out[n - 1]! === spans[k + 1]) out[n - 1]! += spans[k + 2]!
    else out.push(spans[k]!, spans[k + 1]!, spans[k + 2]!)
  }
  return out
}

function renderLinesStream (r: StreamRenderer, task: RenderTask): void {
  const { v4, v6 } = task.networks.total
  const s4 = renderLines(v4, 4)
  const s6 = renderLines(v6, 6)
  const c4 = chunksOf(s4)
  const c6 = chunksOf(s6)
  const n4 = s4.count
  const n6 = s6.count
  const header = (family: WireFamily, entries: number): Uint8Array => renderDialectAHeader({
    name: task.name, description: task.description, action: task.action, family, generated: task.generated[family], entries,
  })
  // The shared region [header both][v4][v6]: plain and dialect_a bodies are spans of it.
  const bothOk = n4 + n6 <= r.limit
  const h4 = header('v4', n4)
  const h6 = header('v6', n6)
  const hBoth = header('both', n4 + n6)
  const hb = r.arena.add(bothOk ? [hBoth] : [])
  const l4 = r.arena.add(n4 <= r.limit ? c4 : [])
  const l6 = r.arena.add(n6 <= r.limit ? c6 : [])
  const md5 = bothOk ? md5Families(c4, c6) : undefined
  r.emit('plain', 'v4', n4, c4, arenaSpans(l4), md5?.v4)
  r.emit('plain', 'v6', n6, c6, arenaSpans(l6), md5?.v6)
  r.emit('plain', 'both', n4 + n6, [...c4, ...c6], arenaSpans(l4, l6), md5?.both)
  r.emit('dialect_a', 'v4', n4, [h4, ...c4], n4 <= r.limit ? arenaSpans(r.arena.add([h4]), l4) : undefined)
  r.emit('dialect_a', 'v6', n6, [h6, ...c6], n6 <= r.limit ? arenaSpans(r.arena.add([h6]), l6) : undefined)
  r.emit('dialect_a', 'both', n4 + n6, [hBoth, ...c4, ...c6], arenaSpans(hb, l4, l6))
}

function renderRowsStream (r: StreamRenderer, task: RenderTask): void {
  const s4 = renderRows(task.networks.groups, 4)
  const s6 = renderRows(task.networks.groups, 6)
  const c4 = chunksOf(s4)
  const c6 = chunksOf(s6)
  const n4 = s4.count
  const n6 = s6.count
  const l4 = r.arena.add(n4 <= r.limit ? c4 : [])
  const l6 = r.arena.add(n6 <= r.limit ? c6 : [])
  const md5 = n4 + n6 <= r.limit ? md5Families(c4, c6) : undefined
  r.emit('dialect_b', 'v4', n4, c4, arenaSpans(l4), md5?.v4)
  r.emit('dialect_b', 'v6', n6, c6, arenaSpans(l6), md5?.v6)
  r.emit('dialect_b', 'both', n4 + n6, [...c4, ...c6], arenaSpans(l4, l6), md5?.both)
}

function nftPieces (s: TextStream): Uint8Array[] {
  // No networks → an empty body: `elements = { }` does not load (DECISIONS §5).
  return s.count === 0 ? [] : [NFT_OPEN, ...chunksOf(s), NFT_CLOSE]
}

function renderNftStream (r: StreamRenderer, task: RenderTask): void {
  const s4 = renderNftItems(task.networks.total.v4, 4)
  const s6 = renderNftItems(task.networks.total.v6, 6)
  // family=both is not a variant: an nftables set holds one family (the HTTP side answers 400).
  r.emit('nftables', 'v4', s4.count, nftPieces(s4))
  r.emit('nftables', 'v6', s6.count, nftPieces(s6))
}

/**
 * Renders every variant of one stream and action. Pure apart from node:crypto and node:zlib.
 *
 * @example
 *   const r = renderStream({ stream: 'lines', action: 'block', networks, name: 'edge', description: '',
 *     generated: { v4: 0, v6: 0, both: 0 }, limit: 131072, listFeed: true, gzipLevel: 6, cache: null })
 *   r.variants.find((v) => v.format === 'plain' && v.family === 'v4' && !v.checksum)
 */
export function renderStream (task: RenderTask): RenderResult {
  const r = new StreamRenderer(task)
  if (task.stream === 'lines') renderLinesStream(r, task)
  else if (task.stream === 'rows') renderRowsStream(r, task)
  else renderNftStream(r, task)
  return r.finish()
}
