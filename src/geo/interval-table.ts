/**
 * Key → networks, as intervals in shared typed arrays. Within one database the networks of
 * different keys never overlap (an address has one country, one ASN), so all intervals of a table
 * sit in ONE array in address order, and each key lists which of them are its own:
 *
 *   v4        [ f l | f l | f l | f l | f l ]   every interval of every key, address order
 *               0     1     2     3     4       (maximal per key: a key's touching networks are joined)
 *   v4Joins   bit r set ⇔ interval r starts right where interval r-1 ends (another key's)
 *   keys      [ k0 | k1 ]                       sorted
 *   v4Members [ 0 3 4 | 1 2 ]                   interval numbers per key, ascending
 *   v4MemberStart [ 0, 3, 5 ]
 *   (v6 alike, 8 words per interval: first w0..w3, last w0..w3 — NetworkSet's layout)
 *
 * The union of many keys (a feed naming 20 countries and 50 ASNs) is then a bitmap over interval
 * numbers scanned once, in address order, joining neighbours by their precomputed bit: no sort and
 * no 128-bit comparison. One key's networks are its members copied out.
 *
 * Built in one pass over the tree walk, whose leaves arrive in address order.
 */

export interface IntervalTableData {
  readonly keys: Uint32Array
  readonly v4: Uint32Array
  readonly v4Joins: Uint32Array
  readonly v4Members: Uint32Array
  readonly v4MemberStart: Uint32Array
  readonly v6: Uint32Array
  readonly v6Joins: Uint32Array
  readonly v6Members: Uint32Array
  readonly v6MemberStart: Uint32Array
  /**
   * Per key rank r: [2r] the shortest prefix length among its IPv4 database records, [2r + 1]
   * among its IPv6 ones; NO_RECORD when it has none. What a publish guard's min-prefix judges of
   * an expansion (src/feed/guards.ts): the records as the database has them, not their union.
   */
  readonly widest: Uint8Array
}

/** IntervalTableData.widest of a family a key has no record in. */
export const NO_RECORD = 255

/** Interval arrays in NetworkSet's layout. */
export interface Intervals { v4: Uint32Array, v6: Uint32Array }

/** A Uint32Array that grows by doubling. */
class Growable {
  a: Uint32Array
  length = 0
  constructor (capacity: number) { this.a = new Uint32Array(Math.max(64, capacity)) }
  grow (n: number): Uint32Array {
    const next = new Uint32Array(Math.max(this.a.length * 2, this.length + n))
    next.set(this.a.subarray(0, this.length))
    this.a = next
    return next
  }
}

/**
 * Collects the walk's leaves, joining a key's touching networks as they come. Keys are numbers
 * (record-keys.ts) registered once per distinct record with `idOf`; `add*` take the id and must
 * come in address order per family.
 */
export class IntervalTableBuilder {
  readonly #ids = new Map<number, number>()
  readonly #keys: number[] = []
  readonly #v4: Growable
  readonly #v4Ids: Growable
  readonly #v4Joins: Growable
  /** Last address of the last IPv4 interval, -2 before the first (touches nothing). */
  #end4 = -2
  readonly #v6: Growable
  readonly #v6Ids: Growable
  readonly #v6Joins: Growable
  #n6 = 0
  readonly #last6 = new Uint32Array(4)

  /** `expected`: about how many networks to expect (a tree of n nodes has at most n + 1 leaves). */
  constructor (expected = 1 << 12) {
    const half = expected >>> 1
    this.#v4 = new Growable(half)
    this.#v4Ids = new Growable(half >>> 1)
    this.#v4Joins = new Growable(half >>> 6)
    this.#v6 = new Growable(2 * half)
    this.#v6Ids = new Growable(half >>> 2)
    this.#v6Joins = new Growable(half >>> 7)
  }

  /** Per id: the widest IPv4 and IPv6 record (IntervalTableData.widest). */
  readonly #widest: number[] = []

  /** The dense id of a key, registering it on first sight. */
  idOf (key: number): number {
    let id = this.#ids.get(key)
    if (id === undefined) {
      id = this.#keys.length
      this.#ids.set(key, id)
      this.#keys.push(key)
      this.#widest.push(NO_RECORD, NO_RECORD)
    }
    return id
  }

  get keyCount (): number { return this.#keys.length }

  addV4 (id: number, addr: number, len: number): void {
    if (len < this.#widest[2 * id]!) this.#widest[2 * id] = len
    const last = addr + 2 ** (32 - len) - 1
    const touches = addr === this.#end4 + 1
    this.#end4 = last
    const n = this.#v4Ids.length
    if (touches && this.#v4Ids.a[n - 1] === id) {
      this.#v4.a[2 * n - 1] = last // the same key continues: widen its interval
      return
    }
    const g = this.#v4
    const a = g.length + 2 <= g.a.length ? g.a : g.grow(2)
    a[g.length] = addr
    a[g.length + 1] = last
    g.length += 2
    push(this.#v4Ids, id)
    if (touches) setBit(this.#v4Joins, n)
  }

  addV6 (id: number, w: Uint32Array, len: number): void {
    if (len < this.#widest[2 * id + 1]!) this.#widest[2 * id + 1] = len
    const prev = this.#last6
    const n = this.#n6
    // Does this network start right after the previous one ends (first = prev + 1)?
    let touches = n > 0
    let carry = 1
    for (let j = 3; j >= 0 && touches; j--) {
      const v = prev[j]! + carry
      touches = (v >>> 0) === w[j]
      carry = v > 0xffffffff ? 1 : 0
    }
    touches &&= carry === 0
    for (let j = 0; j < 4; j++) {
      const keep = len - 32 * j
      prev[j] = keep >= 32 ? w[j]! : keep <= 0 ? 0xffffffff : (w[j]! | (0xffffffff >>> keep)) >>> 0
    }
    if (touches && this.#v6Ids.a[n - 1] === id) {
      this.#v6.a.set(prev, 8 * n - 4)
      return
    }
    const g = this.#v6
    const a = g.length + 8 <= g.a.length ? g.a : g.grow(8)
    const o = g.length
    a[o] = w[0]!; a[o + 1] = w[1]!; a[o + 2] = w[2]!; a[o + 3] = w[3]!
    a.set(prev, o + 4)
    g.length += 8
    push(this.#v6Ids, id)
    if (touches) setBit(this.#v6Joins, n)
    this.#n6 = n + 1
  }

  /** Sorts the keys and lists each key's intervals, into SharedArrayBuffer-backed arrays. */
  build (): IntervalTableData {
    // Keys are distinct, so a native numeric sort of the keys gives the order; the id map turns
    // it back into id → rank.
    const sorted = Float64Array.from(this.#keys).sort()
    const rank = new Uint32Array(sorted.length)
    const keys = sharedU32(sorted.length)
    for (let r = 0; r < sorted.length; r++) {
      keys[r] = sorted[r]!
      rank[this.#ids.get(sorted[r]!)!] = r
    }
    const [v4Members, v4MemberStart] = membersByRank(this.#v4Ids, rank)
    const [v6Members, v6MemberStart] = membersByRank(this.#v6Ids, rank)
    const widest = new Uint8Array(new SharedArrayBuffer(2 * sorted.length))
    for (let id = 0; id < rank.length; id++) {
      widest[2 * rank[id]!] = this.#widest[2 * id]!
      widest[2 * rank[id]! + 1] = this.#widest[2 * id + 1]!
    }
    return {
      widest,
      keys,
      v4: toShared(this.#v4.a, this.#v4.length),
      v4Joins: toShared(this.#v4Joins.a, Math.ceil(this.#v4Ids.length / 32)),
      v4Members,
      v4MemberStart,
      v6: toShared(this.#v6.a, this.#v6.length),
      v6Joins: toShared(this.#v6Joins.a, Math.ceil(this.#v6Ids.length / 32)),
      v6Members,
      v6MemberStart,
    }
  }
}

function push (g: Growable, v: number): void {
  const a = g.length < g.a.length ? g.a : g.grow(1)
  a[g.length++] = v
}

function setBit (g: Growable, i: number): void {
  const w = i >>> 5
  if (w >= g.length) {
    const a = w < g.a.length ? g.a : g.grow(w + 1 - g.length)
    a.fill(0, g.length, w + 1)
    g.length = w + 1
  }
  g.a[w]! |= 1 << (i & 31)
}

/** Counting sort of interval numbers by their key's rank (stable: ascending within a key). */
function membersByRank (ids: Growable, rank: Uint32Array): [Uint32Array, Uint32Array] {
  const n = ids.length
  const start = sharedU32(rank.length + 1)
  for (let i = 0; i < n; i++) start[rank[ids.a[i]!]! + 1]!++
  for (let r = 0; r < rank.length; r++) start[r + 1]! += start[r]!
  const next = start.slice(0, rank.length)
  const members = sharedU32(n)
  for (let i = 0; i < n; i++) members[next[rank[ids.a[i]!]!]!++] = i
  return [members, start]
}

/** The intervals of the key at rank `r`, copied out (NetworkSet layout). */
export function keyIntervals (t: IntervalTableData, r: number): Intervals {
  return {
    v4: gather(t.v4, 2, t.v4Members.subarray(t.v4MemberStart[r], t.v4MemberStart[r + 1])),
    v6: gather(t.v6, 8, t.v6Members.subarray(t.v6MemberStart[r], t.v6MemberStart[r + 1])),
  }
}

function gather (src: Uint32Array, stride: number, members: Uint32Array): Uint32Array {
  const out = new Uint32Array(members.length * stride)
  for (let i = 0; i < members.length; i++) {
    const o = members[i]! * stride
    for (let j = 0; j < stride; j++) out[i * stride + j] = src[o + j]!
  }
  return out
}

/**
 * The union of the keys at ranks `ranks`, as NetworkSet intervals (sorted, disjoint, never
 * adjacent): mark their intervals in a bitmap, then scan it in address order.
 */
export function unionIntervals (t: IntervalTableData, ranks: readonly number[]): Intervals {
  return {
    v4: unionFamily(t.v4, 2, t.v4Joins, t.v4Members, t.v4MemberStart, ranks),
    v6: unionFamily(t.v6, 8, t.v6Joins, t.v6Members, t.v6MemberStart, ranks),
  }
}

function unionFamily (iv: Uint32Array, stride: number, joins: Uint32Array, members: Uint32Array, memberStart: Uint32Array, ranks: readonly number[]): Uint32Array {
  const count = iv.length / stride
  const marks = new Uint32Array(Math.ceil(count / 32))
  let selected = 0
  let lo = marks.length
  let hi = -1
  for (const r of ranks) {
    const from = memberStart[r]!
    const to = memberStart[r + 1]!
    if (from === to) continue
    for (let i = from; i < to; i++) {
      const m = members[i]!
      marks[m >>> 5]! |= 1 << (m & 31)
    }
    selected += to - from
    lo = Math.min(lo, members[from]! >>> 5)
    hi = Math.max(hi, members[to - 1]! >>> 5)
  }
  const out = new Uint32Array(selected * stride)
  let m = -stride // offset of the open interval in out
  let prev = -2
  for (let w = lo; w <= hi; w++) {
    let bits = marks[w]!
    while (bits !== 0) {
      const low = bits & -bits
      const i = (w << 5) + 31 - Math.clz32(low)
      bits ^= low
      const o = i * stride
      if (i === prev + 1 && (joins[i >>> 5]! & low) !== 0) {
        // Touches the selected interval just before it: extend that one's end.
        for (let j = stride >>> 1; j < stride; j++) out[m + j] = iv[o + j]!
      } else {
        m += stride
        for (let j = 0; j < stride; j++) out[m + j] = iv[o + j]!
      }
      prev = i
    }
  }
  return m + stride === out.length ? out : out.slice(0, m + stride)
}

/** Rank of `key` in the sorted keys, or -1. */
export function findKey (t: IntervalTableData, key: number): number {
  const keys = t.keys
  let lo = 0
  let hi = keys.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    const k = keys[mid]!
    if (k === key) return mid
    if (k < key) lo = mid + 1
    else hi = mid - 1
  }
  return -1
}

export function emptyTable (): IntervalTableData {
  return new IntervalTableBuilder(0).build()
}

/** A Uint32Array over a SharedArrayBuffer: posted to a worker, it is shared, not copied. */
export function sharedU32 (n: number): Uint32Array {
  return new Uint32Array(new SharedArrayBuffer(n * 4))
}

function toShared (a: Uint32Array, n: number): Uint32Array {
  const out = sharedU32(n)
  out.set(a.subarray(0, n))
  return out
}
