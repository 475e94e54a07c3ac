/**
 * What a data record means to the index: its country and its ASN, read straight from the bytes
 * by key path (no record is decoded into objects). Schemas operators have:
 *
 * | database                         | country                 | ASN                                  |
 * |----------------------------------|-------------------------|--------------------------------------|
 * | GeoIP2 / GeoLite2 Country, City  | `country.iso_code`      |                                      |
 * | GeoIP2 / GeoLite2 ASN            |                         | `autonomous_system_number` (uint32)  |
 * | DB-IP Lite, ip-location-db       | `country_code`          | `autonomous_system_number`           |
 * | IPinfo Lite                      | `country_code`          | `asn` ("AS13335")                    |
 *
 * Keys are numbers so both indexes share one layout: an ASN is itself, a country code is its two
 * upper-case letters packed as (first << 8) | second, which sorts like the string.
 */
import type { DataDecoder } from './mmdb-data.js'

const key = (s: string): Uint8Array => Buffer.from(s, 'utf8')
const COUNTRY_ISO = [key('country'), key('iso_code')] as const
const COUNTRY_CODE = [key('country_code')] as const
const ASN_NUMBER = [key('autonomous_system_number')] as const
const ASN_TEXT = [key('asn')] as const

export type KeyKind = 'country' | 'asn'

/** Reads one kind of key from the record at a data-section offset; -1 when it has none. */
export type KeyReader = (decoder: DataDecoder, offset: number) => number

/** The packed country key of the record, from `country.iso_code` or else `country_code`. */
export function readCountryKey (decoder: DataDecoder, offset: number): number {
  let at = decoder.find(offset, COUNTRY_ISO)
  if (at < 0) at = decoder.find(offset, COUNTRY_CODE)
  if (at < 0) return -1
  const s = decoder.readString(at)
  return s === undefined ? -1 : packCountryCode(s)
}

/** The ASN of the record, from `autonomous_system_number` or else IPinfo's `asn` ("AS123"). */
export function readAsnKey (decoder: DataDecoder, offset: number): number {
  let at = decoder.find(offset, ASN_NUMBER)
  if (at < 0) at = decoder.find(offset, ASN_TEXT)
  if (at < 0) return -1
  const n = decoder.readUint(at)
  if (n !== undefined) return n >= 1 && n <= 0xffffffff ? n : -1
  const s = decoder.readString(at)
  return s === undefined ? -1 : parseAsnText(s)
}

export const keyReaders: Readonly<Record<KeyKind, KeyReader>> = { country: readCountryKey, asn: readAsnKey }

/**
 * "US" → 0x5553; any case is accepted and folded to upper; -1 if not two ASCII letters.
 *
 * @example
 *   packCountryCode('de') // 0x4445
 */
export function packCountryCode (cc: string): number {
  if (cc.length !== 2) return -1
  const a = cc.charCodeAt(0) & ~0x20 // ASCII letters: clearing 0x20 upper-cases
  const b = cc.charCodeAt(1) & ~0x20
  if (a < 0x41 || a > 0x5a || b < 0x41 || b > 0x5a) return -1
  return (a << 8) | b
}

/** 0x4445 → "DE". */
export function unpackCountryCode (k: number): string {
  return String.fromCharCode(k >>> 8, k & 0xff)
}

/**
 * "AS13335", "as13335" or "13335" → 13335; -1 unless 1..4294967295 in plain decimal.
 *
 * @example
 *   parseAsnText('AS64512') // 64512
 */
export function parseAsnText (s: string): number {
  let i = 0
  if (s.length >= 2 && (s.charCodeAt(0) | 0x20) === 0x61 && (s.charCodeAt(1) | 0x20) === 0x73) i = 2
  if (i === s.length || s.length - i > 10 || s.charCodeAt(i) === 0x30) return -1
  let v = 0
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i) - 0x30
    if (c < 0 || c > 9) return -1
    v = v * 10 + c
  }
  return v <= 0xffffffff ? v : -1
}
