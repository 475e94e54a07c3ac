/**
 * The field schemes as data: every field of both schemes is usable the way its type allows
 * (and only that way), the smart-firewall scheme holds no layer-7 field, aliases resolve,
 * types are well formed, and the phase follows the fields used.
 */
import t from 'tap'
import fc from 'fast-check'
import { checkExpression } from '../../src/expr/check.js'
import { smartFirewallScheme } from '../../src/expr/schemes/smart-firewall.js'
import { wafScheme } from '../../src/expr/schemes/waf.js'
import type { Scheme, Type } from '../../src/expr/types.js'

/** A condition that uses a field of this type correctly. */
function useOf (name: string, type: Type): string {
  switch (type) {
    case 'Bool': return name
    case 'Int': return `${name} in {1 2..9}`
    case 'Bytes': return `${name} contains "x"`
    case 'Ip': return `${name} in {10.0.0.0/8}`
    case 'Array<Bytes>': return `any(${name}[*] eq "x")`
    case 'Map<Array<Bytes>>': return `any(${name}["k"][*] eq "x")`
    default: throw new Error(`no use written for ${type}`)
  }
}

/** A condition that misuses it: an operator its type does not have. */
function misuseOf (name: string, type: Type): { input: string, message: RegExp } {
  if (type === 'Bytes') return { input: `${name} & 1`, message: /^"&" needs Int, / }
  if (type === 'Bool') return { input: `${name} eq 1`, message: /is Bool: use it alone as a condition/ }
  return { input: `${name} contains "x"`, message: new RegExp(`^"contains" needs Bytes, ${name.replace(/\./g, '\\.')} is ${type.replace(/[<>]/g, '.')}`) }
}

const WELL_FORMED = /^(Bool|Int|Bytes|Ip|Array<(Bool|Int|Bytes|Ip)>|Map<Array<Bytes>>)$/

for (const scheme of [wafScheme, smartFirewallScheme] as Scheme[]) {
  t.test(`${scheme.kind}: every field`, async (t) => {
    for (const [name, def] of Object.entries(scheme.fields)) {
      t.match(def.type, WELL_FORMED, `${name}: type ${def.type} is well formed`)
      const ok = checkExpression(scheme.kind, useOf(name, def.type))
      t.same(ok.ok ? ok.fields : ok.error.message, [name], `${name} (${def.type}) checks when used as its type allows`)
      const bad = misuseOf(name, def.type)
      const r = checkExpression(scheme.kind, bad.input, def.phase)
      t.match(r.ok ? 'accepted' : r.error.message, bad.message, `${name} (${def.type}) is rejected when misused`)
    }
  })
}

for (const scheme of [wafScheme, smartFirewallScheme] as Scheme[]) {
  t.test(`${scheme.kind}: the fields reported are the canonical names used, sorted, once each`, async () => {
    // Names and aliases alike, in any order, repeated: the fields are kept as a set of ranks
    // (more than 32 of them in the WAF scheme, so more than one word of bits).
    const names = [...scheme.lookup.keys()]
    const rule = fc.array(fc.constantFrom(...names), { minLength: 1, maxLength: 60 })
    fc.assert(fc.property(rule, fc.constantFrom(' and ', ' or '), (used, join) => {
      const r = checkExpression(scheme.kind, used.map((n) => useOf(n, scheme.lookup.get(n)!.def.type)).join(join))
      const want = [...new Set(used.map((n) => scheme.lookup.get(n)!.name))].sort()
      if (!r.ok) throw new Error(r.error.message)
      if (JSON.stringify(r.fields) !== JSON.stringify(want)) throw new Error(`${used.join(', ')}: ${r.fields.join(', ')}`)
    }), { numRuns: 300 })
  })
}

t.test('each check starts with no fields, after a valid or a rejected rule alike', async (t) => {
  const first = checkExpression('waf_rule', 'ssl and http.host eq "a" and ip.src in {10.0.0.0/8}')
  t.same(first.ok && first.fields, ['http.host', 'ip.src', 'ssl'])
  const rejected = checkExpression('waf_rule', 'http.user_agent contains "a" and http.host eq 1')
  t.notOk(rejected.ok, 'a type error after a field was recorded')
  const next = checkExpression('waf_rule', 'tls.ja4 eq "x"')
  t.same(next.ok && next.fields, ['tls.ja4'])
  const other = checkExpression('smart_firewall_rule', 'tcp.flags.syn')
  t.same(other.ok && other.fields, ['tcp.flags.syn'])
})

t.test('smart firewall scheme holds no layer-7 field', async (t) => {
  const names = [...smartFirewallScheme.lookup.keys()]
  t.same(names.filter((n) => n.startsWith('http.')), [])
  for (const name of Object.keys(wafScheme.fields).filter((n) => n.startsWith('http.'))) {
    const r = checkExpression('smart_firewall_rule', useOf(name, wafScheme.fields[name]!.type))
    t.match(r.ok ? 'accepted' : r.error.message, /^layer-7 field ".*" is not allowed in smart firewall rules/, name)
  }
})

t.test('field types follow Cloudflare\'s reference', async (t) => {
  const expected: Record<string, Type> = {
    'http.request.headers': 'Map<Array<Bytes>>',
    'http.request.uri.args': 'Map<Array<Bytes>>',
    'http.request.headers.names': 'Array<Bytes>',
    'http.request.cookies': 'Map<Array<Bytes>>',
    'http.request.accepted_languages': 'Array<Bytes>',
    'http.request.body.size': 'Int',
    'http.request.body.truncated': 'Bool',
    'http.response.code': 'Int',
    'ip.src': 'Ip',
    'ip.src.asnum': 'Int',
    ssl: 'Bool',
  }
  for (const [name, type] of Object.entries(expected)) t.equal(wafScheme.fields[name]?.type, type, name)
  t.equal(smartFirewallScheme.fields['tcp.flags']?.type, 'Int')
  t.equal(smartFirewallScheme.fields['tcp.flags.syn']?.type, 'Bool')
  t.equal(smartFirewallScheme.fields['ip.proto']?.type, 'Bytes', 'ip.proto is a String in Cloudflare Network Firewall')
})

t.test('aliases resolve to the canonical JA3/JA4 fields in both schemes', async (t) => {
  for (const scheme of [wafScheme, smartFirewallScheme]) {
    t.equal(scheme.lookup.get('cf.bot_management.ja3_hash')?.name, 'tls.ja3', scheme.kind)
    t.equal(scheme.lookup.get('cf.bot_management.ja4')?.name, 'tls.ja4', scheme.kind)
  }
})

t.test('phase: response fields need the response phase', async (t) => {
  const responseFields = Object.entries(wafScheme.fields).filter(([, d]) => d.phase === 'response').map(([n]) => n)
  t.same(responseFields.sort(), ['http.response.code', 'http.response.content_type.media_type', 'http.response.headers', 'http.response.headers.names', 'http.response.headers.values'])
  for (const name of responseFields) {
    const input = useOf(name, wafScheme.fields[name]!.type)
    const detected = checkExpression('waf_rule', input)
    t.equal(detected.ok && detected.phase, 'response', `${name}: phase detected as response`)
    const given = checkExpression('waf_rule', input, 'response')
    t.equal(given.ok && given.phase, 'response', `${name}: phase response accepted`)
    const request = checkExpression('waf_rule', input, 'request')
    t.match(request.ok ? 'accepted' : request.error.message, /is a response-phase field; a rule with phase "request" cannot use it/, `${name}: rejected in a request-phase rule`)
  }
  const requestOnly = checkExpression('waf_rule', 'http.host eq "a"')
  t.equal(requestOnly.ok && requestOnly.phase, 'request')
  const sf = checkExpression('smart_firewall_rule', 'ip.src in {10.0.0.0/8}')
  t.equal(sf.ok && sf.phase, null, 'smart firewall rules report no phase')
})

t.test('checkExpression never throws on wrong argument types', async (t) => {
  const bad = checkExpression('waf_rule', undefined as unknown as string)
  t.same(bad, { ok: false, error: { message: 'the expression must be a string at 1:1', offset: 0, line: 1, column: 1 } })
  const kind = checkExpression('nope' as 'waf_rule', 'ssl')
  t.equal(kind.ok ? '' : kind.error.message, 'unknown rule kind "nope" at 1:1')
  const phase = checkExpression('waf_rule', 'ssl', 'later' as 'request')
  t.equal(phase.ok ? '' : phase.error.message, 'unknown phase "later"; use "request" or "response" at 1:1')
})
