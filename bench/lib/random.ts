/** Deterministic inputs for the benches: every run and every machine races on the same data. */

/** xorshift32 from `seed`. */
export function makeRandom (seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s ^= s << 13; s >>>= 0
    s ^= s >>> 17
    s ^= s << 5; s >>>= 0
    return s
  }
}

/** `count` consecutive items (sorted by size) whose networks add up closest to `total`. */
export function window<T> (items: T[], size: (x: T) => number, count: number, total: number): T[] {
  const sorted = [...items].sort((a, b) => size(a) - size(b))
  let best = 0
  let bestGap = Infinity
  let sum = 0
  for (let i = 0; i < sorted.length; i++) {
    sum += size(sorted[i]!)
    if (i >= count) sum -= size(sorted[i - count]!)
    if (i >= count - 1 && Math.abs(sum - total) < bestGap) { bestGap = Math.abs(sum - total); best = i - count + 1 }
  }
  return sorted.slice(best, best + count)
}
