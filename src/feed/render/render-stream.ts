/**
 * One render task: the dialects that share one text, for one action, every family, identity and
 * gzip, with their checksum variants.
 *
 *   stream  dialects             text (per family)                  bodies that are views of it
 *   lines   plain, dialect_a     `addr/len\n`                        plain v4/v6/both
 *   rows    dialect_b            `value,type,confidence,severity\n`  dialect_b v4/v6/both
 *   nft     nftables             `elements = { a, b, c }\n`          nftables v4/v6
 *
 * Every byte goes into one of two buffers, which reach the main thread without a copy:
 *
 *   text:  [v4 text][v6 text]          depends on the networks alone, so every feed that selects
 *          └──── both ─────┘           the same networks shares one copy (keyed by textKey; see
 *                                      src/feed/shared-content.ts); shared memory
 *   local: [dialect_a headers][checksums][413 bodies][gzip framing, small compressed pieces]
 *
 * plus the chunks this task had to compress. A body that is not one contiguous span — a gzip body
 * (its compressed chunks between a header and a trailer), a dialect_a body (its header, then the
 * shared lines) — is described by spans and assembled on first use (RenderedRepresentation.spans).
 *
 * Incremental by content: a chunk of text whose key (made from its networks, text-streams.ts) is
 * in the previous text (task.cache.text) is copied from there, and one whose compressed form is in
 * task.cache is not compressed again; a text identical to the previous one is that buffer itself.
 * Measured on the 131,072-entry feed of bench/snapshot.ts, one added IP: the three render tasks
 * went from 158 to ~75 ms of CPU, most of what is left being the MD5 of every body (~14 MB).
 *
 * A family over the entry cap has no text at all: its variants are 413 bodies (SPEC 7.2).
 */
import { createHash } from 'node:crypto'
import {
  SOURCE_CHUNK, SOURCE_LOCAL, SOURCE_TEXT,
  type GroupPrefixes, type RenderResult, type RenderTask, type RenderedVariant, type Span, type SpanSource, type WireFamily, type WireFormat,
} from '../../pool/protocol.js'
import { digestOf, keyOfPieces, rememberDigest } from './content-key.js'
import { renderDialectAHeader } from './dialect-a.js'
import { formatEtag, toTagDigest } from './etag.js'
import { ChunkCompressor, crcOf, gzipParts, rememberCrc } from './gzip.js'
import { FamilyText, Scratch, textBound, type TextKind } from './text-streams.js'
import { renderTooLarge } from './too-large.js'

/**
 * The new chunks of every task are written here and copied into the task's text buffer, so a
 * worker reuses one buffer across builds (renderStream is synchronous and keeps no view of it).
 */
const SCRATCH = new Scratch()

const NFT_OPEN = Buffer.from('elements = { ')
const NFT_CLOSE = Buffer.from(' }\n')

/** Collects byte pieces for one buffer; each add() returns where its pieces will sit in it. */
class Arena {
  readonly source: SpanSource
  readonly pieces: Uint8Array[] = []
  #length = 0

  constructor (source: SpanSource) {
    this.source = source
  }

  add (pieces: readonly Uint8Array[]): Span {
    const offset = this.#length
    for (const p of pieces) {
      if (p.length === 0) continue
      this.pieces.push(p)
      this.#length += p.length
    }
    return { source: this.source, offset, length: this.#length - offset }
  }

  /** The pieces in one buffer; a SharedArrayBuffer when `shared` (see RenderResult.text). */
  finish<T extends ArrayBuffer | SharedArrayBuffer> (make: (length: number) => T): T {
    const buffer = make(this.#length)
    const out = new Uint8Array(buffer)
    let o = 0
    for (const p of this.pieces) {
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

/** A body's spans as triples (gzip chunk spans are resolved to chunk indexes in finish()). */
type Spans = number[]

function spansOf (...spans: Span[]): Spans {
  const out: Spans = []
  for (const s of spans) {
    if (s.length === 0) continue
    const n = out.length
    // Adjacent spans of one buffer merge: a body laid out contiguously stays a single view.
    if (n > 0 && out[n - 3] === s.source && out[n - 2]! + out[n - 1]! === s.offset) out[n - 1]! += s.length
    else out.push(s.source, s.offset, s.length)
  }
  return out
}

interface PendingVariant extends Omit<RenderedVariant, 'gzip'> {
  gzip: { etag: string, length: number, key: string, sha256: string, parts: Array<{ key: string, length: number } | Span> }
}

/** SHA-256 of a body's pieces, base64 (RFC 9530 Content-Digest; computed once per build, never per request). */
function sha256Of (pieces: readonly Uint8Array[]): string {
  const h = createHash('sha256')
  for (const p of pieces) h.update(p)
  return h.digest('base64')
}

class StreamRenderer {
  readonly text = new Arena(SOURCE_TEXT)
  readonly local = new Arena(SOURCE_LOCAL)
  readonly variants: PendingVariant[] = []
  readonly compressor: ChunkCompressor
  readonly #task: RenderTask

  /** Pieces of the previous build's text by content key (index into its tables). */
  readonly #previous = new Map<string, number>()

  constructor (task: RenderTask) {
    this.#task = task
    this.compressor = new ChunkCompressor(task.gzipLevel, task.cache)
    task.cache?.text?.pieces.keys.forEach((k, i) => this.#previous.set(k, i))
  }

  get limit (): number { return this.#task.limit }

  /**
   * The text of one kind and family as chunks: those the previous build had are views of its
   * text (neither written nor hashed again), the others are written now. Nothing when the family
   * is over the cap: it is never shown.
   */
  textOf (kind: TextKind, family: 4 | 6, groups: RenderTask['networks']['groups'], count: number): Uint8Array[] {
    if (count === 0 || count > this.limit) return []
    const text = new FamilyText(kind, family, groups)
    const previous = this.#task.cache?.text ?? null
    const pieces: Uint8Array[] = []
    for (let c = 0; c < text.ends.length; c++) {
      const key = text.key(c)
      const i = this.#previous.get(key)
      let piece: Uint8Array
      if (i !== undefined && previous !== null) {
        piece = previous.bytes.subarray(previous.pieces.offsets[i]!, previous.pieces.offsets[i + 1]!)
        rememberCrc(piece, previous.pieces.crcs[i]!)
      } else {
        piece = text.write(c, SCRATCH)
      }
      rememberDigest(piece, key)
      pieces.push(piece)
    }
    return pieces
  }

  /**
   * Records a variant and its checksum variant. `pieces` are the uncompressed body in order;
   * `identity` its spans when the caller placed the body already (in the text), else it is placed
   * in the local buffer; `md5` its digest when the caller has it.
   */
  emit (format: WireFormat, family: WireFamily, entries: number, pieces: readonly Uint8Array[], identity?: Spans, md5?: Buffer): void {
    if (entries > this.limit) {
      const body = renderTooLarge(entries, this.limit, family, this.#task.listFeed)
      const spans = spansOf(this.local.add([body]))
      this.#record(format, family, false, 413, entries, [body], spans)
      this.#record(format, family, true, 413, entries, [body], spans)
      return
    }
    const digest = md5 ?? md5Of(pieces)
    this.#record(format, family, false, 200, entries, pieces, identity ?? spansOf(this.local.add(pieces)), digest)
    const checksum = Buffer.from(digest.toString('hex'))
    this.#record(format, family, true, 200, entries, [checksum], spansOf(this.local.add([checksum])))
  }

  #record (format: WireFormat, family: WireFamily, checksum: boolean, status: 200 | 413, entries: number, pieces: readonly Uint8Array[], identity: Spans, md5?: Buffer): void {
    const action = this.#task.action
    const digest = md5 ?? md5Of(pieces)
    let length = 0
    for (const p of pieces) length += p.length
    const gz = createHash('sha1')
    const gz256 = createHash('sha256')
    let gzLength = 0
    const parts: Array<{ key: string, length: number } | Span> = []
    for (const p of gzipParts(pieces, this.compressor)) {
      gz.update(p.bytes)
      gz256.update(p.bytes)
      gzLength += p.bytes.length
      parts.push(p.key !== null ? { key: p.key, length: p.bytes.length } : this.local.add([p.bytes]))
    }
    // Content keys of bodies of several spans, for sharing them once assembled. The gzip bytes
    // follow from the pieces (each compressed on its own) and the level.
    const pieceKey = identity.length > 3 || parts.length > 1 ? keyOfPieces(pieces) : ''
    this.variants.push({
      format,
      family,
      checksum,
      status,
      entries,
      identity: { etag: formatEtag(format, family, action, checksum, 'identity', toTagDigest(digest), this.#task.shard), length, spans: identity, key: identity.length > 3 ? `i:${pieceKey}` : null, sha256: sha256Of(pieces) },
      gzip: { etag: formatEtag(format, family, action, checksum, 'gzip', toTagDigest(gz.digest()), this.#task.shard), length: gzLength, key: `g${this.#task.gzipLevel}:${pieceKey}`, sha256: gz256.digest('base64'), parts },
    })
  }

  /**
   * The previous text itself when this build's text is the same (unchanged networks, or a first
   * build given another feed's text): nothing is copied or allocated, and the main thread keeps
   * holding the one copy.
   */
  #sameText (key: string): SharedArrayBuffer | null {
    const previous = this.#task.cache?.text
    if (previous?.key !== key) return null
    const { bytes } = previous
    const whole = bytes.buffer instanceof SharedArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
    return whole ? bytes.buffer as SharedArrayBuffer : null
  }

  /** Resolves chunk keys to their index in chunkKeys. */
  finish (): RenderResult {
    const chunkKeys = this.compressor.usedKeys()
    const index = new Map(chunkKeys.map((k, i) => [k, i]))
    const variants: RenderedVariant[] = this.variants.map((v) => {
      const spans: Spans = []
      for (const p of v.gzip.parts) {
        if ('key' in p) spans.push(SOURCE_CHUNK, index.get(p.key)!, p.length)
        else spans.push(...spansOf(p))
      }
      const merged = mergeSpans(spans)
      return { ...v, gzip: { etag: v.gzip.etag, length: v.gzip.length, spans: merged, key: merged.length > 3 ? v.gzip.key : null, sha256: v.gzip.sha256 } }
    })
    const pieces = this.text.pieces
    const offsets = new Uint32Array(pieces.length + 1)
    const crcs = new Uint32Array(pieces.length)
    pieces.forEach((p, i) => {
      offsets[i + 1] = offsets[i]! + p.length
      crcs[i] = crcOf(p)
    })
    const textKey = keyOfPieces(pieces)
    return {
      text: this.#sameText(textKey) ?? this.text.finish((n) => new SharedArrayBuffer(n)),
      textKey,
      textPieces: { keys: pieces.map((p) => digestOf(p)), offsets, crcs },
      local: this.local.finish((n) => new ArrayBuffer(n)),
      chunkKeys,
      fresh: this.compressor.exportFresh(),
      variants,
    }
  }
}

/** Merges adjacent spans of one buffer (chunk spans never merge: each names a whole chunk). */
function mergeSpans (spans: Spans): Spans {
  const out: Spans = []
  for (let k = 0; k < spans.length; k += 3) {
    const n = out.length
    if (n > 0 && spans[k] !== SOURCE_CHUNK && out[n - 3] === spans[k] && out[n - 2]! + out[n - 1]! === spans[k + 1]) out[n - 1]! += spans[k + 2]!
    else out.push(spans[k]!, spans[k + 1]!, spans[k + 2]!)
  }
  return out
}

function renderLinesStream (r: StreamRenderer, task: RenderTask): void {
  const { total, groups } = task.networks
  const n4 = total.v4.length / 2
  const n6 = total.v6.length / 5
  // The groups' labels play no part in plain text: one group of the total suffices.
  const lines = groups.length === 1 ? groups : [{ confidence: '', severity: '', ...total }]
  const c4 = r.textOf('lines', 4, lines, n4)
  const c6 = r.textOf('lines', 6, lines, n6)
  const header = (family: WireFamily, entries: number): Uint8Array => renderDialectAHeader({
    name: task.name, description: task.description, action: task.action, family, generated: task.generated[family], entries, shard: task.shard,
  })
  const bothOk = n4 + n6 <= r.limit
  const l4 = r.text.add(c4)
  const l6 = r.text.add(c6)
  const md5 = bothOk ? md5Families(c4, c6) : undefined
  r.emit('plain', 'v4', n4, c4, spansOf(l4), md5?.v4)
  r.emit('plain', 'v6', n6, c6, spansOf(l6), md5?.v6)
  r.emit('plain', 'both', n4 + n6, [...c4, ...c6], spansOf(l4, l6), md5?.both)
  const h4 = header('v4', n4)
  const h6 = header('v6', n6)
  const hBoth = header('both', n4 + n6)
  r.emit('dialect_a', 'v4', n4, [h4, ...c4], n4 <= r.limit ? spansOf(r.local.add([h4]), l4) : undefined)
  r.emit('dialect_a', 'v6', n6, [h6, ...c6], n6 <= r.limit ? spansOf(r.local.add([h6]), l6) : undefined)
  r.emit('dialect_a', 'both', n4 + n6, [hBoth, ...c4, ...c6], bothOk ? spansOf(r.local.add([hBoth]), l4, l6) : undefined)
}

function rowCount (groups: readonly GroupPrefixes[], family: 4 | 6): number {
  let n = 0
  for (const g of groups) n += family === 4 ? g.v4.length / 2 : g.v6.length / 5
  return n
}

function renderRowsStream (r: StreamRenderer, task: RenderTask): void {
  const groups = task.networks.groups
  const n4 = rowCount(groups, 4)
  const n6 = rowCount(groups, 6)
  const c4 = r.textOf('rows', 4, groups, n4)
  const c6 = r.textOf('rows', 6, groups, n6)
  const l4 = r.text.add(c4)
  const l6 = r.text.add(c6)
  const md5 = n4 + n6 <= r.limit ? md5Families(c4, c6) : undefined
  r.emit('dialect_b', 'v4', n4, c4, spansOf(l4), md5?.v4)
  r.emit('dialect_b', 'v6', n6, c6, spansOf(l6), md5?.v6)
  r.emit('dialect_b', 'both', n4 + n6, [...c4, ...c6], spansOf(l4, l6), md5?.both)
}

function renderNftStream (r: StreamRenderer, task: RenderTask): void {
  const { total, groups } = task.networks
  const n4 = total.v4.length / 2
  const n6 = total.v6.length / 5
  const items = groups.length === 1 ? groups : [{ confidence: '', severity: '', ...total }]
  // No networks → an empty body: `elements = { }` does not load (DECISIONS §5).
  const body = (chunks: Uint8Array[]): Uint8Array[] => chunks.length === 0 ? [] : [NFT_OPEN, ...chunks, NFT_CLOSE]
  const p4 = body(r.textOf('nft', 4, items, n4))
  const p6 = body(r.textOf('nft', 6, items, n6))
  // family=both is not a variant: an nftables set holds one family (the HTTP side answers 400).
  r.emit('nftables', 'v4', n4, p4, spansOf(r.text.add(p4)))
  r.emit('nftables', 'v6', n6, p6, spansOf(r.text.add(p6)))
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
  const { total, groups } = task.networks
  const rows = task.stream === 'rows'
  SCRATCH.reset(textBound(task.stream, rows ? rowCount(groups, 4) : total.v4.length / 2, rows ? rowCount(groups, 6) : total.v6.length / 5))
  const r = new StreamRenderer(task)
  if (task.stream === 'lines') renderLinesStream(r, task)
  else if (task.stream === 'rows') renderRowsStream(r, task)
  else renderNftStream(r, task)
  return r.finish()
}
