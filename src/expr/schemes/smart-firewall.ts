/**
 * The smart-firewall field scheme: layer 3/4 packet fields plus the TLS fingerprint family.
 * Types follow Cloudflare's Network Firewall field reference
 * (developers.cloudflare.com/cloudflare-network-firewall/reference/network-firewall-fields):
 * note that `ip.proto` is a String there ("tcp", "udp", "icmp"), not a protocol number.
 *
 * No field may start with `http.` (SPEC §2.4): these rules act on packets, before any HTTP
 * request exists. The checker reports such a field with its own message, and a test pins
 * that this table holds none.
 */
import { defineScheme, type FieldDef, type Scheme } from '../types.js'

const BYTES = { type: 'Bytes' } as const
const INT = { type: 'Int' } as const
const BOOL = { type: 'Bool' } as const
const IP = { type: 'Ip' } as const

const fields: Record<string, FieldDef> = {
  // --- layer 3 ---
  'ip.src': IP,
  'ip.dst': IP,
  'ip.proto': BYTES,
  'ip.len': INT,
  'ip.ttl': INT,
  'ip.src.country': BYTES,
  'ip.dst.country': BYTES,
  'ip.src.asnum': INT,

  // --- layer 4 ---
  'tcp.srcport': INT,
  'tcp.dstport': INT,
  'tcp.flags': INT,
  'tcp.flags.syn': BOOL,
  'tcp.flags.ack': BOOL,
  'tcp.flags.fin': BOOL,
  'tcp.flags.reset': BOOL,
  'tcp.flags.push': BOOL,
  'tcp.flags.urg': BOOL,
  'tcp.flags.ecn': BOOL,
  'tcp.flags.cwr': BOOL,
  'udp.srcport': INT,
  'udp.dstport': INT,
  'icmp.type': INT,
  'icmp.code': INT,

  // --- TLS fingerprints (JA4+ family: client, server, TCP) ---
  'tls.ja4': BYTES,
  'tls.ja4s': BYTES,
  'tls.ja4t': BYTES,
  'tls.ja3': BYTES,
}

const aliases: Record<string, string> = {
  'cf.bot_management.ja3_hash': 'tls.ja3',
  'cf.bot_management.ja4': 'tls.ja4',
}

export const smartFirewallScheme: Scheme = defineScheme('smart_firewall_rule', fields, aliases, false)
