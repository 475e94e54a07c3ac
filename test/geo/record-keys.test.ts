import t from 'tap'
import { DataDecoder } from '../../src/geo/mmdb-data.js'
import { DataSectionEncoder, mmdbUint16, type MmdbValue } from '../../src/geo/mmdb-encoder.js'
import { packCountryCode, parseAsnText, readAsnKey, readCountryKey, unpackCountryCode } from '../../src/geo/record-keys.js'

function keyOf (record: MmdbValue, read: typeof readCountryKey): number {
  const enc = new DataSectionEncoder()
  const at = enc.write(record)
  return read(new DataDecoder(enc.bytes(), 0, enc.length), at)
}

t.test('country keys by schema', async (t) => {
  const cases: { description: string, input: MmdbValue, expected: string | null }[] = [
    { description: 'GeoIP2 country.iso_code', input: { continent: { code: 'EU' }, country: { iso_code: 'DE', names: { en: 'Germany' } } }, expected: 'DE' },
    { description: 'DB-IP country_code', input: { country_code: 'AU' }, expected: 'AU' },
    { description: 'IPinfo Lite', input: { asn: 'AS13335', as_name: 'Cloudflare', country_code: 'us', continent_code: 'NA' }, expected: 'US' },
    { description: 'iso_code wins over country_code', input: { country: { iso_code: 'FR' }, country_code: 'DE' }, expected: 'FR' },
    { description: 'registered_country is not the country', input: { registered_country: { iso_code: 'US' } }, expected: null },
    { description: 'not two letters', input: { country_code: 'USA' }, expected: null },
    { description: 'not letters', input: { country_code: '1A' }, expected: null },
    { description: 'not a string', input: { country_code: 12 }, expected: null },
    { description: 'not a map', input: 'DE', expected: null },
  ]
  for (const c of cases) {
    const k = keyOf(c.input, readCountryKey)
    t.equal(k < 0 ? null : unpackCountryCode(k), c.expected, c.description)
  }
})

t.test('ASN keys by schema', async (t) => {
  const cases: { description: string, input: MmdbValue, expected: number }[] = [
    { description: 'GeoLite2-ASN uint32', input: { autonomous_system_number: 15169, autonomous_system_organization: 'Google' }, expected: 15169 },
    { description: 'uint16', input: { autonomous_system_number: mmdbUint16(3320) }, expected: 3320 },
    { description: 'IPinfo "AS123"', input: { asn: 'AS13335' }, expected: 13335 },
    { description: 'IPinfo lower case', input: { asn: 'as13335' }, expected: 13335 },
    { description: 'asn as a number', input: { asn: 64496 }, expected: 64496 },
    { description: 'ASN 0 means none', input: { autonomous_system_number: 0 }, expected: -1 },
    { description: 'garbage text', input: { asn: 'ASX' }, expected: -1 },
    { description: 'absent', input: { country_code: 'DE' }, expected: -1 },
  ]
  for (const c of cases) t.equal(keyOf(c.input, readAsnKey), c.expected, c.description)
})

t.test('code packing and ASN text', async (t) => {
  t.equal(packCountryCode('de'), 0x4445)
  t.equal(unpackCountryCode(packCountryCode('zw')), 'ZW')
  for (const bad of ['', 'D', 'DEU', 'D1', '[A', '@A', 'Ä1']) t.equal(packCountryCode(bad), -1, JSON.stringify(bad))
  const cases: [string, number][] = [['AS1', 1], ['as4294967295', 4294967295], ['64512', 64512], ['AS0', -1], ['AS01', -1], ['AS4294967296', -1], ['AS', -1], ['', -1], ['AS-1', -1], ['AS 1', -1], ['AS12345678901', -1]]
  for (const [input, expected] of cases) t.equal(parseAsnText(input), expected, input)
})
