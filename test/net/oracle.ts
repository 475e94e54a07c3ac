/**
 * A slow, obviously-correct model of network sets for property tests: BigInt intervals, array
 * sorts and string formatting that share no code with src/net.
 */
import fc from 'fast-check'

export type Fam = 4 | 6
export interface Net { family: Fam, first: bigint, last: bigint }

export const BITS = { 4: 32, 6: 128 } as const

export function maxOf (family: Fam): bigint {
  return (1n << BigInt(BITS[family])) - 1n
}

/** The prefix `addr/len` as an interval (host bits of addr ignored). */
export function prefixNet (family: Fam, addr: bigint, len: number): Net {
  const host = (1n << BigInt(BITS[family] - len)) - 1n
  const first = addr & ~host & maxOf(family)
  return { family, first, last: first | host }
}

/** Sorted, merged (overlapping and adjacent) intervals per family, IPv4 first. */
export function coalesce (nets: readonly Net[]): Net[] {
  const sorted = [...nets].sort((a, b) => a.family - b.family || (a.first < b.first ? -1 : a.first > b.first ? 1 : 0))
  const out: Net[] = []
  for (const n of sorted) {
    const top = out[out.length - 1]
    if (top !== undefined && top.family === n.family && n.first <= top.last + 1n) {
      if (n.last > top.last) top.last = n.last
    } else {
      out.push({ ...n })
    }
  }
  return out
}

export function subtract (a: readonly Net[], b: readonly Net[]): Net[] {
  let pieces = coalesce(a)
  for (const cut of coalesce(b)) {
    const next: Net[] = []
    for (const p of pieces) {
      if (p.family !== cut.family || cut.last < p.first || cut.first > p.last) { next.push(p); continue }
      if (cut.first > p.first) next.push({ family: p.family, first: p.first, last: cut.first - 1n })
      if (cut.last < p.last) next.push({ family: p.family, first: cut.last + 1n, last: p.last })
    }
    pieces = next
  }
  return coalesce(pieces)
}

/** True when [first, last] of the family lies inside one interval of the coalesced list. */
export function covers (set: readonly Net[], family: Fam, first: bigint, last: bigint): boolean {
  return set.some((n) => n.family === family && n.first <= first && last <= n.last)
}

/** Greedy CIDR decomposition with BigInt, as `[family, first, len]`. */
export function decompose (set: readonly Net[]): { family: Fam, first: bigint, len: number }[] {
  const out: { family: Fam, first: bigint, len: number }[] = []
  for (const n of set) {
    let a = n.first
    while (a <= n.last) {
      // Largest block that is aligned at a (its trailing zeros) and fits in what is left.
      const aligned = a === 0n ? BITS[n.family] : (a & -a).toString(2).length - 1
      const fits = (n.last - a + 1n).toString(2).length - 1
      const k = Math.min(aligned, fits)
      out.push({ family: n.family, first: a, len: BITS[n.family] - k })
      a += 1n << BigInt(k)
    }
  }
  return out
}

export function formatV4 (x: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((x >> s) & 255n)).join('.')
}

/**
 * RFC 5952 by a different route from src/net: write all eight groups, then replace the longest
 * (leftmost on ties) `0:0…` run found by a regex scan.
 */
export function formatV6 (x: bigint): string {
  const groups = Array.from({ length: 8 }, (_, i) => ((x >> BigInt(112 - 16 * i)) & 0xffffn).toString(16))
  const full = groups.join(':')
  let best: { index: number, length: number } | undefined
  for (const m of full.matchAll(/(?:^|:)(0(?::0)+)(?=:|$)/g)) {
    const length = m[1]!.split(':').length
    if (best === undefined || length > best.length) best = { index: m.index + (m[0].startsWith(':') ? 1 : 0), length }
  }
  if (best === undefined) return full
  const before = full.slice(0, best.index).replace(/:$/, '')
  // The run is `length` groups of "0" and the `length - 1` colons between them.
  const after = full.slice(best.index + 2 * best.length - 1).replace(/^:/, '')
  return `${before}::${after}`
}

export function formatNet (family: Fam, first: bigint, len: number): string {
  return `${family === 4 ? formatV4(first) : formatV6(first)}/${len}`
}

export function wordsOf (x: bigint): number[] {
  return [96n, 64n, 32n, 0n].map((s) => Number((x >> s) & 0xffffffffn))
}

export function bigOfWords (w: ArrayLike<number>, o = 0): bigint {
  return (BigInt(w[o]!) << 96n) | (BigInt(w[o + 1]!) << 64n) | (BigInt(w[o + 2]!) << 32n) | BigInt(w[o + 3]!)
}

// ---- fast-check arbitraries: clustered so that overlaps and adjacency actually happen ----

const V4_BASES = [0x0a000000n, 0xc0a80000n, 0xfffffe00n, 0n, 0x7f000000n]
const V6_BASES = [0x20010db8n << 96n, 0xfe80n << 112n, (1n << 128n) - (1n << 20n), 0n, 0x2a02n << 112n]

export const v4Addr = fc.oneof(
  { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...V4_BASES), fc.bigInt({ min: 0n, max: 0x3ffn })).map(([b, o]) => (b + o) & 0xffffffffn) },
  { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: 0xffffffffn }) },
)
export const v6Addr = fc.oneof(
  { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...V6_BASES), fc.bigInt({ min: 0n, max: 0x3ffn })).map(([b, o]) => (b + o) & ((1n << 128n) - 1n)) },
  { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }) },
)

/** A prefix or a range of either family, as the oracle sees it. */
export const netArb: fc.Arbitrary<Net> = fc.oneof(
  fc.tuple(v4Addr, fc.oneof(fc.integer({ min: 20, max: 32 }), fc.integer({ min: 0, max: 32 }))).map(([a, len]) => prefixNet(4, a, len)),
  fc.tuple(v6Addr, fc.oneof(fc.integer({ min: 110, max: 128 }), fc.integer({ min: 0, max: 128 }))).map(([a, len]) => prefixNet(6, a, len)),
  fc.tuple(v4Addr, v4Addr).map(([a, b]) => ({ family: 4 as const, first: a < b ? a : b, last: a < b ? b : a })),
  fc.tuple(v6Addr, v6Addr).map(([a, b]) => ({ family: 6 as const, first: a < b ? a : b, last: a < b ? b : a })),
)
