import t from 'tap'
import { formatCidr4, formatCidr6, formatRange4, formatRange6 } from '../../src/net/format.js'

t.test('CIDR and first-last text', async (t) => {
  const cases: { description: string, got: string, expected: string }[] = [
    { description: 'IPv4 CIDR', got: formatCidr4(0x0a000000, 8), expected: '10.0.0.0/8' },
    { description: 'IPv4 host', got: formatCidr4(0xc0000201, 32), expected: '192.0.2.1/32' },
    { description: 'IPv6 CIDR', got: formatCidr6([0x20010db8, 0, 0, 0], 0, 32), expected: '2001:db8::/32' },
    { description: 'IPv6 CIDR at an offset', got: formatCidr6([7, 7, 0, 0, 0, 1], 2, 128), expected: '::1/128' },
    { description: 'IPv4 range of a /24', got: formatRange4(0xc0000200, 24), expected: '192.0.2.0-192.0.2.255' },
    { description: 'IPv4 range of /0', got: formatRange4(0, 0), expected: '0.0.0.0-255.255.255.255' },
    { description: 'IPv4 range of a host', got: formatRange4(0x01020304, 32), expected: '1.2.3.4-1.2.3.4' },
    { description: 'IPv6 range of a /64', got: formatRange6([0x20010db8, 0, 0, 0], 0, 64), expected: '2001:db8::-2001:db8::ffff:ffff:ffff:ffff' },
    { description: 'IPv6 range of /0', got: formatRange6([0, 0, 0, 0], 0, 0), expected: '::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff' },
    { description: 'IPv6 range of a /127', got: formatRange6([0x20010db8, 0, 0, 2], 0, 127), expected: '2001:db8::2-2001:db8::3' },
  ]
  for (const c of cases) t.equal(c.got, c.expected, c.description)
})
