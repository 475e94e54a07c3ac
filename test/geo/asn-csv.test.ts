import t from 'tap'
import { forEachAsnCsvRow } from '../../src/geo/asn-csv.js'
import { formatIpv4, formatIpv6 } from '../../src/net/ip.js'

function rows (csv: string): string[] {
  const out: string[] = []
  forEachAsnCsvRow(Buffer.from(csv), 'test.csv', (r) => {
    const range = r.family === 4
      ? `${formatIpv4(r.first4)}-${formatIpv4(r.last4)}`
      : `${formatIpv6(r.words.subarray(0, 4))}-${formatIpv6(r.words.subarray(4, 8))}`
    out.push(`${r.line}|${range}|${r.asn}|${r.org}`)
  })
  return out
}

t.test('parses the ip-location-db ASN CSV, RFC 4180 quoting included', async (t) => {
  const cases: { description: string, input: string, expected: string[] }[] = [
    { description: 'plain row', input: '1.0.4.0,1.0.7.255,38803,Gtelecom Pty Ltd\n', expected: ['1|1.0.4.0-1.0.7.255|38803|Gtelecom Pty Ltd'] },
    { description: 'quoted organization with a comma', input: '1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."\n', expected: ['1|1.0.0.0-1.0.0.255|13335|Cloudflare, Inc.'] },
    { description: 'doubled quotes', input: '5.0.0.0,5.0.0.255,1,"The ""Best"", Ltd"\n', expected: ['1|5.0.0.0-5.0.0.255|1|The "Best", Ltd'] },
    { description: 'only a quote', input: '5.0.0.0,5.0.0.255,1,""""\n', expected: ['1|5.0.0.0-5.0.0.255|1|"'] },
    { description: 'empty organization', input: '5.0.0.0,5.0.0.255,1,\n5.0.1.0,5.0.1.255,2,""\n', expected: ['1|5.0.0.0-5.0.0.255|1|', '2|5.0.1.0-5.0.1.255|2|'] },
    { description: 'UTF-8 organization', input: '5.0.0.0,5.0.0.255,1,Ünïcödé ­ GmbH\n', expected: ['1|5.0.0.0-5.0.0.255|1|Ünïcödé ­ GmbH'] },
    { description: 'CRLF line ends', input: '5.0.0.0,5.0.0.255,1,A\r\n5.0.1.0,5.0.1.255,2,"B, C"\r\n', expected: ['1|5.0.0.0-5.0.0.255|1|A', '2|5.0.1.0-5.0.1.255|2|B, C'] },
    { description: 'no newline at the end', input: '5.0.0.0,5.0.0.255,1,A', expected: ['1|5.0.0.0-5.0.0.255|1|A'] },
    { description: 'blank lines', input: '\n5.0.0.0,5.0.0.255,1,A\n\r\n\n5.0.1.0,5.0.1.255,2,B\n', expected: ['2|5.0.0.0-5.0.0.255|1|A', '5|5.0.1.0-5.0.1.255|2|B'] },
    { description: 'a header line is skipped', input: 'ip_range_start,ip_range_end,autonomous_system_number,autonomous_system_organization\n5.0.0.0,5.0.0.255,1,A\n', expected: ['2|5.0.0.0-5.0.0.255|1|A'] },
    { description: 'IPv6 rows', input: '2001:200::,2001:200:1b9:ffff:ffff:ffff:ffff:ffff,2500,WIDE Project\n', expected: ['1|2001:200::-2001:200:1b9:ffff:ffff:ffff:ffff:ffff|2500|WIDE Project'] },
    { description: 'a quoted line break', input: '5.0.0.0,5.0.0.255,1,"A\nB"\n5.0.1.0,5.0.1.255,2,C\n', expected: ['1|5.0.0.0-5.0.0.255|1|A\nB', '2|5.0.1.0-5.0.1.255|2|C'] },
    { description: 'single-address range', input: '9.9.9.9,9.9.9.9,19281,Quad9\n', expected: ['1|9.9.9.9-9.9.9.9|19281|Quad9'] },
    { description: 'largest ASN', input: '9.9.9.9,9.9.9.9,4294967295,X\n', expected: ['1|9.9.9.9-9.9.9.9|4294967295|X'] },
  ]
  for (const c of cases) t.same(rows(c.input), c.expected, c.description)
})

t.test('malformed rows fail with TF_ERR_GEO_LOAD naming the file and line', async (t) => {
  const cases: { description: string, input: string, expected: RegExp }[] = [
    { description: 'three fields', input: '5.0.0.0,5.0.0.255,1,A\n5.0.0.0,5.0.0.255,1\n', expected: /test\.csv: line 2: expected 4 fields/ },
    { description: 'five unquoted fields', input: '5.0.0.0,5.0.0.255,1,A,B\n', expected: /line 1: expected 4 fields, found more/ },
    { description: 'stray quote', input: '5.0.0.0,5.0.0.255,1,A"B\n', expected: /line 1: stray quote/ },
    { description: 'text after the closing quote', input: '5.0.0.0,5.0.0.255,1,"A"B\n', expected: /line 1: unexpected text after the organization field/ },
    { description: 'unterminated quote', input: '5.0.0.0,5.0.0.255,1,"A\n', expected: /line 1: unterminated quoted field/ },
    { description: 'reversed range', input: '5.0.0.0,5.0.0.255,1,A\n5.0.0.9,5.0.0.1,1,A\n', expected: /line 2: invalid or reversed address range "5\.0\.0\.9" - "5\.0\.0\.1"/ },
    { description: 'leading zeros', input: '5.0.0.0,5.0.0.255,1,A\n05.0.0.0,5.0.0.255,1,A\n', expected: /line 2: invalid or reversed address range/ },
    { description: 'mixed families', input: '5.0.0.0,5.0.0.255,1,A\n5.0.0.0,::1,1,A\n', expected: /line 2: invalid or reversed address range/ },
    { description: 'numeric -num variant', input: '16777216,16777471,13335,"Cloudflare, Inc."\n16778240,16779263,38803,G\n', expected: /line 2: numeric addresses \("16778240"\) are not supported/ },
    { description: 'ASN not a number', input: '5.0.0.0,5.0.0.255,1,A\n5.0.0.0,5.0.0.255,AS1,A\n', expected: /line 2: invalid ASN "AS1"/ },
    { description: 'ASN too large', input: '5.0.0.0,5.0.0.255,1,A\n5.0.0.0,5.0.0.255,4294967296,A\n', expected: /line 2: invalid ASN "4294967296"/ },
  ]
  for (const c of cases) {
    t.throws(() => rows(c.input), { code: 'TF_ERR_GEO_LOAD', message: c.expected }, c.description)
  }
})

t.test('progress is reported up to the whole file', async (t) => {
  const csv = Buffer.from('5.0.0.0,5.0.0.255,1,A\n'.repeat(70000))
  const seen: number[] = []
  const n = forEachAsnCsvRow(csv, 'p.csv', () => {}, (done) => seen.push(done))
  t.equal(n, 70000)
  t.ok(seen.length >= 2, 'at least one intermediate report')
  t.equal(seen.at(-1), csv.length)
})
