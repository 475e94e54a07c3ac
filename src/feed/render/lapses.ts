/**
 * When each published network lapses (docs/bouncers.md "Durations"): the instant after which no
 * address of it would be published by the rules of this build alone. For one address that is
 * the latest expiry among the rules covering it (Infinity: one never expires); for a network,
 * the earliest of those over its addresses — a bouncer told to keep the network that long never
 * keeps a lapsed address, and drops nothing still live before it.
 *
 *   rules' intervals, each with its expiry ──► upper envelope f(x) = max expiry covering x
 *       (one sweep: intervals by first address, a max-heap of the open ones, popped lazily)
 *   published networks (sorted, disjoint) ──► min of f over each, walking the envelope once
 *
 * O(m log m + n) for m rule intervals and n networks; runs in the pool beside computeNetworks.
 */
import { FIRST, INTERVAL_WORDS, LAST, lastV4, maskV4, scanCidr } from '../../net/cidr.js'
import type { GeoIndex } from '../../geo/geo-index.js'
import type { LapseTargets, WirePrefixes } from '../../pool/protocol.js'

const CH_NL = 0x0a

/** Open intervals as a max-heap on expiry (indices into the interval arrays). */
class MaxHeap {
  readonly #items: number[] = []
  readonly #key: ArrayLike<number>

  constructor (key: ArrayLike<number>) {
    this.#key = key
  }

  get size (): number {
    return this.#items.length
  }

  top (): number {
    return this.#items[0]!
  }

  push (i: number): void {
    const a = this.#items
    const k = this.#key
    a.push(i)
    let c = a.length - 1
    while (c > 0) {
      const p = (c - 1) >> 1
      if (k[a[p]!]! >= k[a[c]!]!) break
      const t = a[p]!
      a[p] = a[c]!
      a[c] = t
      c = p
    }
  }

  pop (): void {
    const a = this.#items
    const k = this.#key
    const last = a.pop()!
    if (a.length === 0) return
    a[0] = last
    let p = 0
    for (;;) {
      const l = 2 * p + 1
      const r = l + 1
      let m = p
      if (l < a.length && k[a[l]!]! > k[a[m]!]!) m = l
      if (r < a.length && k[a[r]!]! > k[a[m]!]!) m = r
      if (m === p) break
      const t = a[p]!
      a[p] = a[m]!
      a[m] = t
      p = m
    }
  }
}

/**
 * min over each query [qFirst[j], qLast[j]] of the envelope of intervals [first[i], last[i]] with
 * expiry e[i]; -Infinity where an address is covered by none (not expected: published networks
 * come from these rules). Positions are numbers (IPv4) or bigints (IPv6).
 */
function envelopeMin<T extends number | bigint> (first: T[], last: T[], e: number[], qFirst: T[], qLast: T[], next: (x: T) => T): Float64Array {
  const out = new Float64Array(qFirst.length)
  const order = first.map((_, i) => i).sort((a, b) => first[a]! < first[b]! ? -1 : first[a]! > first[b]! ? 1 : 0)
  const heap = new MaxHeap(e)
  let k = 0
  // The envelope as segments [at[s], at[s + 1]) of value val[s], built in one sweep.
  const at: T[] = []
  const val: number[] = []
  let p: T | null = order.length > 0 ? first[order[0]!]! : null
  while (p !== null) {
    while (k < order.length && first[order[k]!]! <= p) heap.push(order[k++]!)
    while (heap.size > 0 && last[heap.top()]! < p) heap.pop()
    at.push(p)
    val.push(heap.size > 0 ? e[heap.top()]! : -Infinity)
    // The next point where the envelope may change: the next start, or the end of the top interval.
    let q: T | null = k < order.length ? first[order[k]!]! : null
    if (heap.size > 0) {
      const end = next(last[heap.top()]!)
      if (q === null || end < q) q = end
    }
    p = q
  }
  let s = 0
  for (let j = 0; j < qFirst.length; j++) {
    const a = qFirst[j]!
    const b = qLast[j]!
    while (s + 1 < at.length && at[s + 1]! <= a) s++
    if (at.length === 0 || at[s]! > a) {
      out[j] = -Infinity
      continue
    }
    let m = Infinity
    for (let t = s; t < at.length && at[t]! <= b; t++) if (val[t]! < m) m = val[t]!
    out[j] = m
  }
  return out
}

function word128 (w: ArrayLike<number>, o: number): bigint {
  return (BigInt(w[o]!) << 96n) | (BigInt(w[o + 1]!) << 64n) | (BigInt(w[o + 2]!) << 32n) | BigInt(w[o + 3]!)
}

/**
 * The lapse (ms, Infinity for never) of each prefix of `total` — its IPv4 prefixes, then its IPv6
 * ones — under the rules whose targets and expiries `lt` holds.
 *
 * @example
 *   lapsesOf({ v4: new Uint32Array([0x0a000000, 24]), v6: new Uint32Array(0) },
 *     { ips: '10.0.0.0/25\n10.0.0.128/25\n10.0.0.0/24\n', ipExpiry: new Float64Array([5, 9, 7]), asns: [], asnExpiry: [], countries: [], countryExpiry: [] }, null)
 *   // Float64Array [7]: 10.0.0.0/25 is covered until 7, 10.0.0.128/25 until 9
 */
export function lapsesOf (total: WirePrefixes, lt: LapseTargets, geo: GeoIndex | null): Float64Array {
  const f4: number[] = []
  const l4: number[] = []
  const e4: number[] = []
  const f6: bigint[] = []
  const l6: bigint[] = []
  const e6: number[] = []
  const interval = new Uint32Array(INTERVAL_WORDS)
  const text = typeof lt.ips === 'string' ? lt.ips : Buffer.from(lt.ips.buffer, lt.ips.byteOffset, lt.ips.byteLength).toString('latin1')
  let line = 0
  for (let i = 0; i < text.length; line++) {
    let j = text.indexOf('\n', i)
    if (j < 0) j = text.length
    const family = scanCidr(text, i, j, interval)
    const e = lt.ipExpiry[line]!
    if (family === 4) {
      f4.push(interval[FIRST]!)
      l4.push(interval[LAST]!)
      e4.push(e)
    } else if (family === 6) {
      f6.push(word128(interval, FIRST))
      l6.push(word128(interval, LAST))
      e6.push(e)
    }
    i = j + 1
    if (text.charCodeAt(j) !== CH_NL) break
  }
  if (geo !== null) {
    // One expansion per distinct expiry of the geo rules (few: countries and ASNs are rare rules).
    const byExpiry = new Map<number, { countries: string[], asns: number[] }>()
    const at = (e: number): { countries: string[], asns: number[] } => {
      let g = byExpiry.get(e)
      if (g === undefined) byExpiry.set(e, g = { countries: [], asns: [] })
      return g
    }
    lt.asns.forEach((a, i) => { at(lt.asnExpiry[i]!).asns.push(a) })
    lt.countries.forEach((c, i) => { at(lt.countryExpiry[i]!).countries.push(c) })
    for (const [e, keys] of byExpiry) {
      const iv = geo.expandToSet(keys).intervals()
      for (let k = 0; k < iv.v4.length; k += 2) {
        f4.push(iv.v4[k]!)
        l4.push(iv.v4[k + 1]!)
        e4.push(e)
      }
      for (let k = 0; k < iv.v6.length; k += 8) {
        f6.push(word128(iv.v6, k))
        l6.push(word128(iv.v6, k + 4))
        e6.push(e)
      }
    }
  }
  const q4f: number[] = []
  const q4l: number[] = []
  for (let k = 0; k < total.v4.length; k += 2) {
    const len = total.v4[k + 1]!
    q4f.push((total.v4[k]! & maskV4(len)) >>> 0)
    q4l.push(lastV4(total.v4[k]!, len))
  }
  const q6f: bigint[] = []
  const q6l: bigint[] = []
  for (let k = 0; k < total.v6.length; k += 5) {
    const a = word128(total.v6, k)
    const host = 128n - BigInt(total.v6[k + 4]!)
    q6f.push(a)
    q6l.push(a | ((1n << host) - 1n))
  }
  const v4 = envelopeMin(f4, l4, e4, q4f, q4l, (x) => x + 1)
  const v6 = envelopeMin(f6, l6, e6, q6f, q6l, (x) => x + 1n)
  const out = new Float64Array(v4.length + v6.length)
  out.set(v4)
  out.set(v6, v4.length)
  return out
}
