import t from 'tap'
import { ASSIGNED_COUNTRY_CODES, isAssignedCountryCode } from '../../src/geo/countries.js'
import { loadGeoIndexSync } from '../../src/geo/load.js'
import { defaultCountryDb } from '../../src/geo/default-db.js'

t.test('the ISO 3166-1 table holds the 249 assigned codes', async (t) => {
  t.equal(ASSIGNED_COUNTRY_CODES.length, 249)
  t.equal(new Set(ASSIGNED_COUNTRY_CODES).size, 249, 'no duplicates')
  t.same(ASSIGNED_COUNTRY_CODES, [...ASSIGNED_COUNTRY_CODES].sort(), 'sorted')
  t.ok(ASSIGNED_COUNTRY_CODES.every((c) => /^[A-Z]{2}$/.test(c)))
})

t.test('assigned codes pass, reserved and user-assigned ones fail (DECISIONS §3)', async (t) => {
  const cases: { input: string, expected: boolean }[] = [
    { input: 'GB', expected: true },
    { input: 'gb', expected: true },
    { input: 'De', expected: true },
    { input: 'US', expected: true },
    { input: 'SS', expected: true }, // South Sudan, 2011
    { input: 'BQ', expected: true },
    { input: 'AQ', expected: true },
    { input: 'XX', expected: false },
    { input: 'UK', expected: false }, // exceptionally reserved; the code is GB
    { input: 'EU', expected: false }, // exceptionally reserved
    { input: 'XK', expected: false }, // Kosovo: user-assigned, not ISO
    { input: 'ZZ', expected: false },
    { input: 'AN', expected: false }, // Netherlands Antilles, withdrawn 2010
    { input: 'YU', expected: false },
    { input: '', expected: false },
    { input: 'G', expected: false },
    { input: 'GBR', expected: false },
    { input: 'g1', expected: false },
  ]
  for (const c of cases) t.equal(isAssignedCountryCode(c.input), c.expected, JSON.stringify(c.input))
})

t.test('every country of the embedded DB-IP database is assigned, or a known non-ISO code', async (t) => {
  const index = loadGeoIndexSync({ countryDb: defaultCountryDb() })
  const odd = index.countries().filter((c) => !isAssignedCountryCode(c))
  t.ok(odd.every((c) => c === 'XK' || c === 'ZZ' || c === 'EU' || c === 'AP'), `not ISO: ${odd.join(', ') || 'none'}`)
})
