/**
 * One pass over a MaxMind DB search tree, reporting every network that has data. The walk is
 * where a corrupt tree must not turn into a crash or a hang, so it checks as it goes:
 *
 * - every record is a node below node_count, node_count itself (no data), or a pointer that lands
 *   inside the data section;
 * - no path is longer than the address (32 or 128 bits), which also ends any cycle;
 * - every node is entered at most once. A tree whose records point back up, or that shares a
 *   subtree, would otherwise be walked once per path (2^128 of them for a node pointing to itself
 *   twice); this bounds the whole walk to node_count visits;
 * - every node is reached: a node no path leads to is garbage from a broken writer, or a sign
 *   that node_count is wrong.
 *
 * IPv4 in an IPv6 tree (DECISIONS §5): IPv4 space lives at ::/96 and is reported once, as IPv4.
 * MaxMind trees also alias it at ::ffff:0:0/96 (IPv4-mapped), 2001::/32 (Teredo) and 2002::/16
 * (6to4) by pointing those records at the ::/96 node; those prefixes are skipped whatever they
 * hold, as is any other record pointing at the ::/96 node, so no IPv4 space is ever reported as
 * IPv6 and the alias is not mistaken for a shared subtree. When a data record sits above one of
 * these prefixes (say ::/64), it is split on the way down so the part outside is still reported.
 */
import type { MmdbFile } from './mmdb-file.js'
import { SEPARATOR_BYTES } from './mmdb-file.js'
import { MmdbFormatError } from './mmdb-format-error.js'

export interface LeafVisitor {
  /** An IPv4 network `addr/len` (addr an unsigned 32-bit number) with data at section offset `data`. */
  v4 (addr: number, len: number, data: number): void
  /** An IPv6 network; `words` (w0 most significant) is reused between calls: copy, don't keep. */
  v6 (words: Uint32Array, len: number, data: number): void
}

interface Special { readonly words: readonly number[], readonly len: number, readonly ipv4: boolean }

/** ::/96 first: its bit is V4_BIT. */
const SPECIALS: readonly Special[] = [
  { words: [0, 0, 0, 0], len: 96, ipv4: true },
  { words: [0, 0, 0xffff, 0], len: 96, ipv4: false },
  { words: [0x20010000, 0, 0, 0], len: 32, ipv4: false },
  { words: [0x20020000, 0, 0, 0], len: 16, ipv4: false },
]
const V4_BIT = 1
const ALL_SPECIALS = (1 << SPECIALS.length) - 1

// Per depth d: which specials continue when bit d is 0 / 1, and which end exactly at depth d.
const KEEP0 = new Uint8Array(128)
const KEEP1 = new Uint8Array(128)
const EXACT = new Uint8Array(129)
SPECIALS.forEach((s, i) => {
  EXACT[s.len]! |= 1 << i
  for (let d = 0; d < s.len; d++) {
    const bit = (s.words[d >>> 5]! >>> (31 - (d & 31))) & 1
    if (bit === 0) KEEP0[d]! |= 1 << i
    else KEEP1[d]! |= 1 << i
  }
})

export interface WalkStats {
  /** Nodes entered (each at most once). */
  nodes: number
  v4Networks: number
  v6Networks: number
}

/**
 * Walks the tree of `file`, calling `visitor` for each network with data, in address order
 * (IPv4 networks first in an IPv6 tree, since ::/96 is the leftmost subtree).
 *
 * @example
 *   walkSearchTree(openMmdb(buf), { v4: (a, l, d) => …, v6: (w, l, d) => … })
 */
export function walkSearchTree (file: MmdbFile, visitor: LeafVisitor): WalkStats {
  return new TreeWalker(file, visitor).run()
}

class TreeWalker {
  readonly #file: MmdbFile
  readonly #visitor: LeafVisitor
  readonly #n: number
  readonly #dataSize: number
  readonly #visited: Uint8Array
  readonly #words = new Uint32Array(4)
  readonly #left: (node: number) => number
  readonly #right: (node: number) => number
  /** Node at ::/96 in an IPv6 tree, or -1 when that prefix is not a node. */
  #ipv4Root = -1
  readonly #stats: WalkStats = { nodes: 0, v4Networks: 0, v6Networks: 0 }

  constructor (file: MmdbFile, visitor: LeafVisitor) {
    this.#file = file
    this.#visitor = visitor
    this.#n = file.metadata.nodeCount
    this.#dataSize = file.data.size
    this.#visited = new Uint8Array(this.#n)
    this.#left = file.left
    this.#right = file.right
  }

  run (): WalkStats {
    if (this.#file.metadata.ipVersion === 4) {
      this.#enter4(0, 0, 0)
    } else {
      let node = 0
      for (let d = 0; d < 96 && node < this.#n; d++) node = this.#left(node)
      this.#ipv4Root = node < this.#n ? node : -1
      this.#enter6(0, 0, ALL_SPECIALS)
    }
    const unreached = this.#n - this.#stats.nodes
    if (unreached !== 0) {
      throw new MmdbFormatError(`${unreached} of ${this.#n} search tree nodes are unreachable from the root (corrupt tree or wrong node_count)`)
    }
    return this.#stats
  }

  #visit (node: number, depth: number, bits: number): void {
    if (depth >= bits) throw new MmdbFormatError(`search tree node ${node} sits at depth ${depth}, deeper than a ${bits}-bit address`)
    if (this.#visited[node] !== 0) throw new MmdbFormatError(`search tree node ${node} is reached twice (a cycle or a shared subtree)`)
    this.#visited[node] = 1
    this.#stats.nodes++
  }

  /** Section offset of a data record, checked. */
  #data (record: number, node: number): number {
    const off = record - this.#n - SEPARATOR_BYTES
    if (off < 0 || off >= this.#dataSize) {
      throw new MmdbFormatError(`search tree record ${record} (in node ${node}) points outside the data section`)
    }
    return off
  }

  /** A record reached at prefix length `depth` of an IPv6 tree; `live` = specials still on the path. */
  #enter6 (record: number, depth: number, live: number, parent = 0): void {
    if (live !== 0) {
      const exact = live & EXACT[depth]!
      if (exact !== 0) {
        if ((exact & V4_BIT) !== 0) this.#enter4(record, 0, 0, parent)
        else if (record < this.#n && record !== this.#ipv4Root) this.#skip(record, depth)
        return
      }
    }
    const n = this.#n
    if (record < n) {
      if (record === this.#ipv4Root) return // another alias of IPv4 space
      this.#visit(record, depth, 128)
      this.#node6(this.#left(record), this.#right(record), depth, live, record)
    } else if (record > n) {
      const data = this.#data(record, parent)
      if (live !== 0) {
        this.#node6(record, record, depth, live, parent)
      } else {
        this.#stats.v6Networks++
        this.#visitor.v6(this.#words, depth, data)
      }
    }
  }

  /** Descends both halves; a data record above a special prefix is passed down as both halves. */
  #node6 (left: number, right: number, depth: number, live: number, node: number): void {
    this.#enter6(left, depth + 1, live & KEEP0[depth]!, node)
    const w = depth >>> 5
    const bit = 1 << (31 - (depth & 31))
    this.#words[w]! |= bit
    this.#enter6(right, depth + 1, live & KEEP1[depth]!, node)
    this.#words[w]! &= ~bit
  }

  /**
   * Enters the nodes of a skipped alias prefix that holds a subtree of its own (not a pointer to
   * ::/96), so that they count as reachable and are checked like any other, but reports nothing.
   */
  #skip (node: number, depth: number): void {
    this.#visit(node, depth, 128)
    for (const r of [this.#left(node), this.#right(node)]) {
      if (r < this.#n) {
        if (r !== this.#ipv4Root) this.#skip(r, depth + 1)
      } else if (r > this.#n) {
        this.#data(r, node)
      }
    }
  }

  /** A record reached at prefix length `depth` of IPv4 space, address bits so far in `addr`. */
  #enter4 (record: number, depth: number, addr: number, parent = 0): void {
    const n = this.#n
    if (record < n) {
      this.#visit(record, depth, 32)
      this.#enter4(this.#left(record), depth + 1, addr, record)
      this.#enter4(this.#right(record), depth + 1, (addr | (1 << (31 - depth))) >>> 0, record)
    } else if (record > n) {
      const data = this.#data(record, parent)
      this.#stats.v4Networks++
      this.#visitor.v4(addr, depth, data)
    }
  }
}
