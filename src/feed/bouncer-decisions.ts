/**
 * Published networks as CrowdSec decisions (docs/bouncers.md): the JSON a bouncer's stream or
 * live pull reads. Pure; the answer's shape is CrowdSec's models.Decision, read by go-cs-bouncer:
 *
 *   {"duration":"3h59m0s","id":1234,"origin":"threatfeed","scenario":"threatfeed:acme","scope":"Ip","type":"ban","value":"192.0.2.7"}
 *
 * A host prefix (/32, /128) is scope `Ip` with the bare address, anything wider `Range` with
 * the CIDR — what LAPI itself sends, and what the firewall bouncer turns into set elements.
 */
import { formatIpv4, formatIpv6 } from '../net/ip.js'
import { mix32 } from './render/mix32.js'
import type { PublishedPrefixes } from './snapshot-types.js'

/** The scopes a stream may ask for (`scopes=ip,range`), as LAPI spells them in answers. */
export type DecisionScope = 'Ip' | 'Range'

export interface DecisionOptions {
  /** Whole seconds the bouncer keeps each decision at most (deleted ones: 0). */
  readonly seconds: number
  /**
   * When each prefix of `p` lapses (ms; its IPv4 prefixes first), and the instant durations
   * count from: a decision's duration is cut to its lapse, rounded down to the second.
   */
  readonly lapse?: Float64Array | null
  readonly now?: number
  /** The scenario naming the set (`threatfeed:<list or workspace name>`). */
  readonly scenario: string
  /** Which scopes to write: Ip (host prefixes), Range (wider ones). */
  readonly ip: boolean
  readonly range: boolean
}

/** 2^21: the high part of a 53-bit id. */
const HIGH = 0x200000
const TWO_32 = 0x1_0000_0000

/**
 * A decision's id: a function of the network alone (so every node and every build gives the
 * same id), folded into a positive 53-bit integer as JSON numbers and Go's int64 both hold.
 *
 * @example
 *   decisionId4(0xc0000207, 32) === decisionId4(0xc0000207, 32) // true, on any node
 */
export function decisionId4 (addr: number, len: number): number {
  const lo = mix32((addr ^ Math.imul(len + 1, 0x9e3779b1)) >>> 0)
  const hi = mix32((lo ^ addr ^ 0x85ebca6b) >>> 0) % HIGH
  return hi * TWO_32 + lo + 1
}

/** decisionId4 for an IPv6 prefix at words[at..at+4] with its length at words[at+4]. */
export function decisionId6 (words: ArrayLike<number>, at: number): number {
  let h = Math.imul(words[at + 4]! + 7, 0x9e3779b1)
  for (let k = 0; k < 4; k++) h = mix32((h ^ words[at + k]!) >>> 0)
  const lo = h
  const hi = mix32((h ^ words[at]! ^ words[at + 3]! ^ 0xc2b2ae35) >>> 0) % HIGH
  return hi * TWO_32 + lo + 1
}

/**
 * Seconds as Go's time.Duration prints them (what LAPI sends and go-cs-bouncer parses with
 * time.ParseDuration): `0s`, `45s`, `1m30s`, `3h59m0s`.
 *
 * @example
 *   goDuration(14340) // '3h59m0s'
 */
export function goDuration (seconds: number): string {
  const s = Math.max(0, Math.floor(seconds))
  if (s < 60) return `${s}s`
  const h = Math.floor(s / 3600)
  const m = Math.floor((s % 3600) / 60)
  return h > 0 ? `${h}h${m}m${s % 60}s` : `${m}m${s % 60}s`
}

/** Count of decisions `p` gives under the scopes of `o`. */
export function countDecisions (p: PublishedPrefixes, o: Pick<DecisionOptions, 'ip' | 'range'>): number {
  let n = 0
  for (let i = 1; i < p.v4.length; i += 2) if (p.v4[i] === 32 ? o.ip : o.range) n++
  for (let i = 4; i < p.v6.length; i += 5) if (p.v6[i] === 128 ? o.ip : o.range) n++
  return n
}

/**
 * The decisions of `p` as a JSON array, or `null` when there are none (LAPI's nil slice: the
 * bouncers read both). Keys in LAPI's order.
 *
 * @example
 *   renderDecisions({ v4: new Uint32Array([0xc0000207, 32]), v6: new Uint32Array(0) }, { seconds: 60, scenario: 'threatfeed:acme', ip: true, range: true })
 *   // '[{"duration":"1m0s","id":…,"origin":"threatfeed","scenario":"threatfeed:acme","scope":"Ip","type":"ban","value":"192.0.2.7"}]'
 */
export function renderDecisions (p: PublishedPrefixes, o: DecisionOptions): string {
  const parts: string[] = []
  const fixed = `{"duration":"${goDuration(o.seconds)}","id":`
  const lapse = o.lapse ?? null
  const now = o.now ?? 0
  const headOf = (i: number): string => {
    if (lapse === null) return fixed
    const s = Math.floor((lapse[i]! - now) / 1000)
    return s >= o.seconds ? fixed : `{"duration":"${goDuration(s)}","id":`
  }
  const n4 = p.v4.length >> 1
  const mid = `,"origin":"threatfeed","scenario":${JSON.stringify(o.scenario)},"scope":"`
  for (let i = 0; i < p.v4.length; i += 2) {
    const addr = p.v4[i]!
    const len = p.v4[i + 1]!
    const host = len === 32
    if (host ? !o.ip : !o.range) continue
    const text = formatIpv4(addr)
    parts.push(`${headOf(i >> 1)}${decisionId4(addr, len)}${mid}${host ? 'Ip' : 'Range'}","type":"ban","value":"${host ? text : `${text}/${len}`}"}`)
  }
  for (let i = 0; i < p.v6.length; i += 5) {
    const len = p.v6[i + 4]!
    const host = len === 128
    if (host ? !o.ip : !o.range) continue
    const text = formatIpv6(p.v6, i)
    parts.push(`${headOf(n4 + i / 5)}${decisionId6(p.v6, i)}${mid}${host ? 'Ip' : 'Range'}","type":"ban","value":"${host ? text : `${text}/${len}`}"}`)
  }
  return parts.length === 0 ? 'null' : `[${parts.join(',')}]`
}
