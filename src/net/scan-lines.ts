/**
 * Reads line-oriented network lists — the input of `threatfeed coalesce` — straight from bytes
 * into a NetworkSetBuilder. One entry per line: an address, a CIDR or a `first-last` range
 * (blanks allowed around the dash). Blank lines are skipped; `#` starts a comment anywhere on a
 * line (it cannot occur in an address); blanks and a CR before the line end are trimmed, so CRLF
 * files and indented lists read as expected.
 *
 * Two paths, for speed (bench/coalesce: a million lines):
 * - the fast path parses a bare `a.b.c.d[/len]` or `ipv6[/len]` line in one pass over the bytes,
 *   Uint8Array reads being about twice as fast as charCodeAt on this machine, and pushes its
 *   interval without touching a string;
 * - anything else (comments, blanks, ranges, dotted IPv6 tails, IPv4-mapped addresses, errors)
 *   drops to the general path: the line as a latin1 string through the scanners of cidr.ts,
 *   which also serve single texts. Both apply the same grammar; the property tests hold them to
 *   it line by line.
 *
 * latin1 keeps byte offsets equal to string offsets, and bytes ≥ 0x80 become chars ≥ 0x80, which
 * no parser accepts, so UTF-8 garbage is refused, never misread.
 */
import { INTERVAL_WORDS, isBlank, lastV4, maskV4, scanCidr, scanRange } from './cidr.js'
import { readIpv4, readPrefixLength } from './ip.js'
import type { NetworkSetBuilder, FamilyFilter } from './network-set.js'

const CH_NL = 0x0a
const CH_CR = 0x0d
const CH_HASH = 0x23
const CH_DASH = 0x2d
const CH_SLASH = 0x2f
const CH_0 = 0x30
const CH_COLON = 0x3a

/** Byte → hex digit value, or -1. */
const HEX = new Int8Array(256).fill(-1)
for (let c = 0; c < 10; c++) HEX[CH_0 + c] = c
for (let c = 0; c < 6; c++) { HEX[0x41 + c] = 10 + c; HEX[0x61 + c] = 10 + c }

/** Called per refused line: its 1-based number and the trimmed entry at `bytes[start, end)`. */
export type InvalidLineHandler = (line: number, start: number, end: number, bytes: Uint8Array) => void

export interface ScanResult {
  /** Lines that held an entry (valid or not). */
  entries: number
  /** Entries refused. */
  invalid: number
}

const interval = new Uint32Array(INTERVAL_WORDS)
const groups = new Uint16Array(8)
/** readIpv4's address and length. */
const target = new Uint32Array(2)
const NOT_FAST = -1

/**
 * Adds every valid entry of the selected family to `builder`; reports the others.
 *
 * @example
 *   const b = new NetworkSetBuilder()
 *   scanLines(Buffer.from('10.0.0.0/8\n# note\nbad\n'), b, (line) => console.log(line)) // logs 3
 */
export function scanLines (bytes: Uint8Array, builder: NetworkSetBuilder, onInvalid: InvalidLineHandler, family: FamilyFilter = 'both'): ScanResult {
  const state: ScanState = { entries: 0, invalid: 0, line: 0 }
  scanSpan(bytes, 0, bytes.length, builder, onInvalid, family, state)
  return { entries: state.entries, invalid: state.invalid }
}

interface ScanState extends ScanResult {
  /** Lines read so far. */
  line: number
}

/**
 * scanLines fed chunk by chunk, for input read into one reused buffer: only whole lines are
 * scanned from a chunk, and the bytes after its last newline are kept until the next one. A
 * chunk may be overwritten once push() returns; so the handler's `bytes` are only valid during
 * the call.
 *
 * @example
 *   const s = new LineScanner(builder, onInvalid)
 *   s.push(Buffer.from('10.0.0.1\n10.0.')); s.push(Buffer.from('0.2\n'))
 *   s.end() // { entries: 2, invalid: 0 }
 */
export class LineScanner {
  readonly #builder: NetworkSetBuilder
  readonly #onInvalid: InvalidLineHandler
  readonly #family: FamilyFilter
  readonly #state: ScanState = { entries: 0, invalid: 0, line: 0 }
  /** The unfinished last line of the chunks so far (a copy). */
  #carry: Uint8Array | null = null

  constructor (builder: NetworkSetBuilder, onInvalid: InvalidLineHandler, family: FamilyFilter = 'both') {
    this.#builder = builder
    this.#onInvalid = onInvalid
    this.#family = family
  }

  push (chunk: Uint8Array): void {
    let from = 0
    if (this.#carry !== null) {
      const nl = chunk.indexOf(CH_NL)
      if (nl < 0) {
        this.#carry = Buffer.concat([this.#carry, chunk])
        return
      }
      const line = Buffer.concat([this.#carry, chunk.subarray(0, nl + 1)])
      this.#carry = null
      this.#scan(line, 0, line.length)
      from = nl + 1
    }
    const last = chunk.lastIndexOf(CH_NL)
    if (last >= from) this.#scan(chunk, from, last + 1)
    const rest = Math.max(from, last + 1)
    if (rest < chunk.length) this.#carry = Uint8Array.prototype.slice.call(chunk, rest)
  }

  /** Scans the last line (one without a newline) and returns the counts. */
  end (): ScanResult {
    if (this.#carry !== null) this.#scan(this.#carry, 0, this.#carry.length)
    this.#carry = null
    return { entries: this.#state.entries, invalid: this.#state.invalid }
  }

  #scan (bytes: Uint8Array, from: number, to: number): void {
    scanSpan(bytes, from, to, this.#builder, this.#onInvalid, this.#family, this.#state)
  }
}

/** Scans the lines of `bytes[pos, n)` (n is a line end or the end of input) into `builder`. */
function scanSpan (bytes: Uint8Array, pos: number, n: number, builder: NetworkSetBuilder, onInvalid: InvalidLineHandler, family: FamilyFilter, state: ScanState): void {
  const wantV4 = family !== 'v6'
  const wantV6 = family !== 'v4'
  const latin1 = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let entries = 0
  let invalid = 0
  let line = state.line
  while (pos < n) {
    const c = bytes[pos]!
    if (c - CH_0 >= 0 && c - CH_0 <= 9) {
      const after = scanIpv4Run(bytes, pos, n, builder, wantV4)
      if (after !== pos) {
        line += runLines
        entries += runLines
        pos = after
        continue
      }
    }
    line++
    let next = NOT_FAST
    if (HEX[c]! >= 0 || c === CH_COLON) next = fastIpv6(bytes, pos, n, builder, wantV6)
    if (next !== NOT_FAST) {
      entries++
      pos = next
      continue
    }
    let nl = bytes.indexOf(CH_NL, pos)
    if (nl < 0 || nl > n) nl = n
    const text = latin1.toString('latin1', pos, nl)
    const base = pos
    pos = nl + 1
    // General path, on the line's own string.
    let start = 0
    let end = text.length
    let dash = false
    for (let i = 0; i < end; i++) {
      const ch = text.charCodeAt(i)
      if (ch === CH_HASH) { end = i; break }
      if (ch === CH_DASH) dash = true
    }
    while (end > start && isTrailingBlank(text.charCodeAt(end - 1))) end--
    while (start < end && isBlank(text.charCodeAt(start))) start++
    if (start === end) continue
    entries++
    const f = dash ? scanRange(text, start, end, interval, true) : scanCidr(text, start, end, interval)
    if (f === 0) {
      invalid++
      onInvalid(line, base + start, base + end, bytes)
    } else if (f === 4 ? wantV4 : wantV6) {
      builder.addScanned(f, interval)
    }
  }
  state.entries += entries
  state.invalid += invalid
  state.line = line
}

function isTrailingBlank (c: number): boolean {
  return c === 0x20 || c === 0x09 || c === CH_CR
}

/**
 * Position after the line end when `b[i..]` is exactly `[/len]` then `\n`, `\r\n` or the end of
 * input; NOT_FAST otherwise.
 */
function lineEnd (b: Uint8Array, i: number, n: number): number {
  if (i === n) return n
  const c = b[i]!
  if (c === CH_NL) return i + 1
  if (c === CH_CR && (i + 1 === n || b[i + 1] === CH_NL)) return i + 2
  return NOT_FAST
}

/** Intervals of an IPv4 run, handed to the builder in batches of this many. */
const RUN_BATCH = 4096
const runFirsts = new Uint32Array(RUN_BATCH)
const runLasts = new Uint32Array(RUN_BATCH)
/** Lines the last scanIpv4Run read (a module variable: the run's end is its return value). */
let runLines = 0

/**
 * Consecutive bare `a.b.c.d[/len]` lines from `b[pos]` — the bulk of a block list — in one
 * small loop of its own, which V8 optimises early and cheaply. Returns where the first line of
 * another form starts (`pos` when the first one is), and the lines read in runLines.
 */
function scanIpv4Run (b: Uint8Array, pos: number, n: number, builder: NetworkSetBuilder, want: boolean): number {
  let lines = 0
  let k = 0
  while (pos < n) {
    let i = readIpv4(b, pos, n, target)
    if (i >= 0) i = readPrefixLength(b, i, n, 32, target)
    if (i < 0) break
    const next = lineEnd(b, i, n)
    if (next === NOT_FAST) break
    const addr = target[0]!
    const len = target[1]!
    runFirsts[k] = (addr & maskV4(len)) >>> 0
    runLasts[k] = lastV4(addr, len)
    if (++k === RUN_BATCH) {
      if (want) builder.addScannedV4(runFirsts, runLasts, k)
      k = 0
    }
    lines++
    pos = next
  }
  if (want && k > 0) builder.addScannedV4(runFirsts, runLasts, k)
  runLines = lines
  return pos
}

/** One-pass `hex:groups[::…][/len]` line (no dotted tail, not IPv4-mapped). */
function fastIpv6 (b: Uint8Array, pos: number, n: number, builder: NetworkSetBuilder, want: boolean): number {
  let i = pos
  let count = 0
  let gap = -1
  if (b[i] === CH_COLON) {
    if (i + 1 >= n || b[i + 1] !== CH_COLON) return NOT_FAST
    gap = 0
    i += 2
  }
  // After "::" a group is optional ("::", "1::"); after a single ":" one is required.
  let needGroup = gap < 0
  for (;;) {
    let v = 0
    let d = 0
    while (i < n) {
      const h = HEX[b[i]!]!
      if (h < 0) break
      v = (v << 4) | h
      i++
      if (++d > 4) return NOT_FAST
    }
    if (d === 0) {
      if (needGroup) return NOT_FAST
      break
    }
    if (count === 8) return NOT_FAST
    groups[count++] = v
    if (i < n && b[i] === CH_COLON) {
      i++
      if (i < n && b[i] === CH_COLON) {
        if (gap >= 0) return NOT_FAST
        gap = count
        i++
        needGroup = false
      } else {
        needGroup = true
      }
      continue
    }
    break
  }
  if (gap < 0 ? count !== 8 : count > 7) return NOT_FAST
  let len = 128
  if (i < n && b[i] === CH_SLASH) {
    let v = 0
    let d = 0
    i++
    while (i < n) {
      const x = b[i]! - CH_0
      if (x < 0 || x > 9) break
      if (d === 1 && v === 0) return NOT_FAST
      v = v * 10 + x
      i++
      if (++d > 3) return NOT_FAST
    }
    if (d === 0 || v > 128) return NOT_FAST
    len = v
  }
  const next = lineEnd(b, i, n)
  if (next === NOT_FAST) return NOT_FAST
  if (gap >= 0) {
    const zeros = 8 - count
    for (let k = count - 1; k >= gap; k--) groups[k + zeros] = groups[k]!
    for (let k = gap; k < gap + zeros; k++) groups[k] = 0
  }
  const w0 = ((groups[0]! << 16) | groups[1]!) >>> 0
  const w1 = ((groups[2]! << 16) | groups[3]!) >>> 0
  const w2 = ((groups[4]! << 16) | groups[5]!) >>> 0
  const w3 = ((groups[6]! << 16) | groups[7]!) >>> 0
  // IPv4-mapped space needs the IPv4 normalization of the general path.
  if (w0 === 0 && w1 === 0) return NOT_FAST
  if (want) builder.addV6(w0, w1, w2, w3, len)
  return next
}
