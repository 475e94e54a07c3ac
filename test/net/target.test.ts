import t from 'tap'
import fc from 'fast-check'
import { parseTarget, type TargetResult } from '../../src/net/target.js'
import { formatNet, prefixNet, v4Addr, v6Addr } from './oracle.js'

const ok = (cidr: string, family: 4 | 6): TargetResult => ({ ok: true, cidr, family })
const no = (reason: string): TargetResult => ({ ok: false, reason })

const cases: { description: string, input: string, expected: TargetResult }[] = [
  // normalization (DECISIONS §3)
  { description: 'IPv4 address → /32', input: '192.0.2.1', expected: ok('192.0.2.1/32', 4) },
  { description: 'IPv6 address → /128', input: '2001:db8::1', expected: ok('2001:db8::1/128', 6) },
  { description: 'host bits set → network', input: '10.0.0.1/8', expected: ok('10.0.0.0/8', 4) },
  { description: 'IPv6 host bits set → network', input: '2001:db8::1/32', expected: ok('2001:db8::/32', 6) },
  { description: 'IPv4-mapped → IPv4', input: '::ffff:1.2.3.4', expected: ok('1.2.3.4/32', 4) },
  { description: 'IPv4-mapped in hex → IPv4', input: '::ffff:102:304', expected: ok('1.2.3.4/32', 4) },
  { description: 'IPv4-mapped CIDR → IPv4 CIDR', input: '::ffff:10.1.2.3/104', expected: ok('10.0.0.0/8', 4) },
  { description: 'RFC 5952 output: upper case and padding', input: '2001:0DB8:0000:0000:0000:0000:0000:0001', expected: ok('2001:db8::1/128', 6) },
  { description: 'RFC 5952 output: one zero group stays', input: '2001:db8:0:1:1:1:1:1', expected: ok('2001:db8:0:1:1:1:1:1/128', 6) },
  { description: 'RFC 5952 output: first longest run', input: '2001:db8:0:0:1:0:0:1', expected: ok('2001:db8::1:0:0:1/128', 6) },
  { description: 'unspecified /128', input: '::', expected: ok('::/128', 6) },
  { description: 'loopback', input: '::1/128', expected: ok('::1/128', 6) },
  { description: 'explicit /32', input: '198.51.100.7/32', expected: ok('198.51.100.7/32', 4) },
  { description: 'IPv4-compatible (deprecated) stays IPv6', input: '::1.2.3.4', expected: ok('::102:304/128', 6) },
  // floors
  { description: '/8 is the widest IPv4 target', input: '10.0.0.0/8', expected: ok('10.0.0.0/8', 4) },
  { description: '/7 refused', input: '10.0.0.0/7', expected: no('IPv4 prefixes shorter than /8 are refused') },
  { description: '/0 refused', input: '0.0.0.0/0', expected: no('IPv4 prefixes shorter than /8 are refused') },
  { description: 'mapped /100 is an IPv4 /4, refused', input: '::ffff:0.0.0.0/100', expected: no('IPv4 prefixes shorter than /8 are refused') },
  { description: '/12 is the widest IPv6 target', input: '2001:db8::/12', expected: ok('2000::/12', 6) },
  { description: '/11 refused', input: '2001:db8::/11', expected: no('IPv6 prefixes shorter than /12 are refused') },
  { description: '::/0 refused', input: '::/0', expected: no('IPv6 prefixes shorter than /12 are refused') },
  // refusals
  { description: 'zone id', input: 'fe80::1%eth0', expected: no('zone ids are not allowed') },
  { description: 'zone id with prefix', input: 'fe80::1%eth0/64', expected: no('zone ids are not allowed') },
  { description: 'leading zero', input: '010.0.0.1', expected: no('IPv4 octets with leading zeros are not allowed') },
  { description: 'leading zero in a CIDR', input: '10.0.0.01/32', expected: no('IPv4 octets with leading zeros are not allowed') },
  { description: 'hex form', input: '0x0a000001', expected: no('IPv4 addresses in hex form are not allowed') },
  { description: 'hex octets', input: '0xa.0.0.1', expected: no('IPv4 addresses in hex form are not allowed') },
  { description: 'integer form', input: '167772161', expected: no('IPv4 addresses in integer form are not allowed') },
  { description: 'short dotted form', input: '10.1', expected: no('an IPv4 address has four dotted octets') },
  { description: 'octet out of range', input: '10.0.0.256', expected: no('IPv4 octet 256 is out of range') },
  { description: 'prefix too long (IPv4)', input: '1.2.3.4/33', expected: no('prefix length 33 is out of range for IPv4') },
  { description: 'prefix too long (IPv6)', input: '2001:db8::/129', expected: no('prefix length 129 is out of range for IPv6') },
  { description: 'prefix with leading zero', input: '10.0.0.0/08', expected: no('prefix lengths with leading zeros are not allowed') },
  { description: 'negative prefix', input: '10.0.0.0/-8', expected: no('ranges are not allowed here; use an address or a CIDR') },
  { description: 'non-numeric prefix', input: '10.0.0.0/x', expected: no('invalid prefix length "x"') },
  { description: 'missing prefix', input: '10.0.0.0/', expected: no('missing prefix length after "/"') },
  { description: 'netmask form', input: '10.0.0.0/255.0.0.0', expected: no('invalid prefix length "255.0.0.0"') },
  { description: 'empty', input: '', expected: no('empty string') },
  { description: 'leading space', input: ' 1.2.3.4', expected: no('whitespace and control characters are not allowed') },
  { description: 'trailing newline', input: '1.2.3.4\n', expected: no('whitespace and control characters are not allowed') },
  { description: 'tab inside', input: '1.2.3.4\t/32', expected: no('whitespace and control characters are not allowed') },
  { description: 'NUL', input: '1.2.3.4\u0000', expected: no('whitespace and control characters are not allowed') },
  { description: 'no-break space', input: '1.2.3.4\u00a0', expected: no('whitespace and control characters are not allowed') },
  { description: 'range', input: '10.0.0.0-10.0.0.255', expected: no('ranges are not allowed here; use an address or a CIDR') },
  { description: 'hostname', input: 'example.com', expected: no('not an IP address') },
  { description: 'malformed IPv6', input: '2001:db8:::1', expected: no('invalid IPv6 address') },
  { description: 'bad dotted tail', input: '::ffff:1.2.3.04', expected: no('IPv4 octets with leading zeros are not allowed') },
]

t.test('parseTarget normalizes and refuses as DECISIONS §3 says', async (t) => {
  for (const c of cases) t.same(parseTarget(c.input), c.expected, `${c.description}: ${JSON.stringify(c.input)}`)
})

t.test('a non-string is refused, not thrown on', async (t) => {
  t.same(parseTarget(42 as unknown as string), no('must be a string'))
})

t.test('every valid CIDR at or above the floor normalizes to the oracle text', async () => {
  fc.assert(fc.property(v4Addr, fc.integer({ min: 8, max: 32 }), (a, len) => {
    const text = `${Number(a >> 24n)}.${Number((a >> 16n) & 255n)}.${Number((a >> 8n) & 255n)}.${Number(a & 255n)}/${len}`
    const r = parseTarget(text)
    return r.ok && r.cidr === formatNet(4, prefixNet(4, a, len).first, len)
  }))
  fc.assert(fc.property(v6Addr, fc.integer({ min: 12, max: 128 }), (a, len) => {
    fc.pre(a >> 32n !== 0xffffn) // mapped space normalizes to IPv4, tested above
    const text = `${formatNet(6, a, len)}`
    const r = parseTarget(text)
    return r.ok && r.cidr === formatNet(6, prefixNet(6, a, len).first, len)
  }))
})

t.test('refusals never throw and always carry a reason', async () => {
  fc.assert(fc.property(fc.string({ unit: fc.constantFrom(...'0123456789abcdefx:./-% \t#'.split('')), maxLength: 45 }), (s) => {
    const r = parseTarget(s)
    return r.ok ? /^[0-9a-f:.]+\/\d+$/.test(r.cidr) : r.reason.length > 0
  }), { numRuns: 3000 })
})
