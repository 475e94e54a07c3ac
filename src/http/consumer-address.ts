/**
 * The address a feed consumer is recorded by (issue 20): the peer of the connection, or — when
 * the peer is one of THREATFEED_TRUSTED_PROXIES — the rightmost address of X-Forwarded-For that
 * is not a trusted proxy. Each proxy appends the address it received from, so everything left of
 * the first untrusted hop (reading from the right) was written by the client and can be forged;
 * the first untrusted hop was written by a trusted proxy. A client that is not a trusted proxy
 * cannot spoof an address at all: its header is not read.
 *
 * An address is returned as a map key that costs no allocation for IPv4: its 32 bits as a signed
 * int32, which V8 keeps as a small integer (an unsigned value of 2^31 and above would be a heap
 * number, boxed on every poll). IPv6 keys are their RFC 5952 text. `addressText` turns a key into
 * text, once per new consumer.
 */
import type { HttpRequest, HttpResponse } from 'uWebSockets.js'
import { FIRST, INTERVAL_WORDS, LAST, scanAddress, scanCidr } from '../net/cidr.js'
import { formatIpv4, formatIpv6, isIpv4Mapped, parseIpv4 } from '../net/ip.js'
import { CLIENT_ADDRESS_HEADER, isForwarded } from './forward.js'
import { compare128 } from '../net/words.js'

export type AddressKey = number | string

const COMMA = 0x2c
const SPACE = 0x20
const TAB = 0x09

/**
 * Parses THREATFEED_TRUSTED_PROXIES: CIDRs or addresses separated by commas or blanks.
 * Returns the canonical entries, or the first one that is not a network.
 *
 * @example
 *   parseTrustedProxies('127.0.0.1, 10.0.0.0/8') // { ok: true, cidrs: ['127.0.0.1/32', '10.0.0.0/8'] }
 */
export function parseTrustedProxies (text: string): { ok: true, cidrs: string[] } | { ok: false, bad: string } {
  const out = new Uint32Array(INTERVAL_WORDS)
  const cidrs: string[] = []
  for (const item of text.split(/[\s,]+/)) {
    if (item === '') continue
    const family = scanCidr(item, 0, item.length, out)
    if (family === 0) return { ok: false, bad: item }
    cidrs.push(family === 4 ? `${formatIpv4(out[FIRST]!)}/${out[8]}` : `${formatIpv6(out, FIRST)}/${out[8]}`)
  }
  return { ok: true, cidrs }
}

export class ClientAddresses {
  /** IPv4 networks as [first, last] pairs. */
  readonly #v4: Uint32Array
  /** IPv6 networks as first (4 words), last (4 words). */
  readonly #v6: Uint32Array
  readonly #any: boolean
  /** Scratch for the address being read (module state would do; one instance per server). */
  readonly #scratch = new Uint32Array(4)

  /** `cidrs`: THREATFEED_TRUSTED_PROXIES as parseTrustedProxies returns it. */
  constructor (cidrs: readonly string[]) {
    const out = new Uint32Array(INTERVAL_WORDS)
    const v4: number[] = []
    const v6: number[] = []
    for (const c of cidrs) {
      const family = scanCidr(c, 0, c.length, out)
      if (family === 4) v4.push(out[FIRST]!, out[LAST]!)
      else if (family === 6) v6.push(...out.subarray(FIRST, FIRST + 4), ...out.subarray(LAST, LAST + 4))
    }
    this.#v4 = Uint32Array.from(v4)
    this.#v6 = Uint32Array.from(v6)
    this.#any = cidrs.length > 0
  }

  /**
   * The client's address key for this request. Reads `req`: call it before any await.
   */
  of (res: HttpResponse, req: HttpRequest): AddressKey {
    // A front-end thread's forwarded request: the address that thread resolved.
    if (isForwarded(res)) {
      const text = req.getHeader(CLIENT_ADDRESS_HEADER)
      if (text !== '') {
        const v4 = parseIpv4(text)
        return v4 >= 0 ? v4 | 0 : text
      }
    }
    const peer = this.#peer(res)
    if (!this.#any || !this.#trusted(peer)) return peer
    return this.#forwarded(req.getHeader('x-forwarded-for'), peer)
  }

  /** The connection's peer: uWS gives 4 bytes, or 16 (IPv4-mapped when it listens on IPv6). */
  #peer (res: HttpResponse): AddressKey {
    const b = new Uint8Array(res.getRemoteAddress())
    if (b.length === 4) return (b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!
    if (b.length !== 16) return ''
    const w = this.#scratch
    for (let k = 0; k < 4; k++) w[k] = ((b[4 * k]! << 24) | (b[4 * k + 1]! << 16) | (b[4 * k + 2]! << 8) | b[4 * k + 3]!) >>> 0
    return isIpv4Mapped(w) ? w[3]! | 0 : formatIpv6(w)
  }

  #trusted (key: AddressKey): boolean {
    if (typeof key === 'number') {
      const v4 = this.#v4
      const a = key >>> 0
      for (let i = 0; i < v4.length; i += 2) if (a >= v4[i]! && a <= v4[i + 1]!) return true
      return false
    }
    if (key === '') return false
    const w = this.#scratch
    if (scanAddress(key, 0, key.length, w, 0) !== 6) return false
    return this.#trustedV6(w)
  }

  #trustedV6 (w: Uint32Array): boolean {
    const v6 = this.#v6
    for (let i = 0; i < v6.length; i += 8) if (compare128(w, 0, v6, i) >= 0 && compare128(w, 0, v6, i + 4) <= 0) return true
    return false
  }

  /**
   * The rightmost untrusted address of X-Forwarded-For; when every entry is a trusted proxy, the
   * leftmost; when an entry is not an address, the trusted hop right of it (nothing left of a
   * malformed entry can be trusted to be what a proxy wrote).
   */
  #forwarded (header: string, peer: AddressKey): AddressKey {
    let hop = peer
    let end = header.length
    while (end > 0) {
      let start = end
      while (start > 0 && header.charCodeAt(start - 1) !== COMMA) start--
      let a = start
      let z = end
      while (a < z && (header.charCodeAt(a) === SPACE || header.charCodeAt(a) === TAB)) a++
      while (z > a && (header.charCodeAt(z - 1) === SPACE || header.charCodeAt(z - 1) === TAB)) z--
      const w = this.#scratch
      const family = scanAddress(header, a, z, w, 0)
      if (family === 0) return hop
      hop = family === 4 ? w[0]! | 0 : formatIpv6(w)
      if (!(family === 4 ? this.#trusted(hop) : this.#trustedV6(w))) return hop
      end = start - 1
    }
    return hop
  }
}

/** The text of an address key. */
export function addressText (key: AddressKey): string {
  return typeof key === 'number' ? formatIpv4(key >>> 0) : key
}
