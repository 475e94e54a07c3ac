/**
 * The type checker: resolves fields against the rule kind's scheme, checks every operator
 * against its operand types, function signatures, indexing, regex and wildcard patterns, and
 * the rule's phase. It throws ExpressionError at the first problem, pointing at the operator,
 * value or name that is wrong, with a message that says what to write instead.
 *
 * Map-each (`[*]`) follows wirefilter: a comparison on a map-each operand yields Array<Bool>,
 * which only any()/all() (or a logical operator between two such arrays) can consume.
 *
 * Types are written as literals ('Bool', not types.ts's BOOL) on purpose: tsx, which runs the
 * tests and benches, compiles modules to CommonJS, where each use of an imported binding is a
 * getter call, and these comparisons run several times per node. The compiler checks every
 * literal against the Type union.
 */
import type { Arg, Compare, Expr, Literal, Operand, SetLit, StringLit } from './ast.js'
import { fail, suggest } from './diagnostic.js'
import { functions, type ArgInfo } from './functions.js'
import { bytesToText } from './lexer.js'
import { printLiteral, printOperand } from './printer.js'
import { checkRegex } from './regex.js'
import { arrayOf, elementType, findField, isArrayType, isMapType, resolveField, type Phase, type Scheme, type Type } from './types.js'
import { checkWildcard } from './wildcard.js'

export interface CheckContext {
  readonly src: string
  readonly scheme: Scheme
  /** The other kind's scheme, to say "it is a smart_firewall_rule field". */
  readonly other: Scheme
  readonly phase: Phase | undefined
  /** Ranks (FieldEntry.rank) of the fields used, unique, in order of first use. */
  readonly fields: number[]
  usesResponseField: boolean
  /**
   * Set by typeOfOperand alongside the type it returns: whether the operand maps over an
   * array or map (`[*]`). An out-parameter rather than a result object, since it runs per clause.
   */
  each: boolean
}

/** Checks a whole expression; it must be one Bool. */
export function checkTree (e: Expr, ctx: CheckContext): void {
  const t = typeOfExpr(e, ctx)
  if (t !== 'Bool') fail(`the expression is ${t}: wrap the [*] comparison in any(…) or all(…)`, e.pos)
}

function typeOfExpr (e: Expr, ctx: CheckContext): Type {
  switch (e.kind) {
    case 'group': return typeOfExpr(e.expr, ctx)
    case 'not': return typeOfExpr(e.arg, ctx)
    case 'compare': return typeOfCompare(e, ctx)
    case 'bare': {
      const t = typeOfOperand(e.operand, ctx)
      if (t === 'Bool') return ctx.each ? 'Array<Bool>' : 'Bool'
      return fail(`${printOperand(e.operand)} is ${t}, not a condition: compare it with an operator (eq, contains, in, …)`, e.pos)
    }
    case 'logical': {
      const first = typeOfExpr(e.items[0]!, ctx)
      for (let i = 1; i < e.items.length; i++) {
        const item = e.items[i]!
        const t = typeOfExpr(item, ctx)
        if (t !== first) fail(`"${e.op}" cannot combine ${first} with ${t}: wrap the [*] comparison in any(…) or all(…)`, item.pos)
      }
      return first
    }
  }
}

function typeOfOperand (o: Operand, ctx: CheckContext): Type {
  switch (o.kind) {
    case 'field': {
      const t = resolve(o.name, o.pos, ctx)
      ctx.each = false
      return t
    }
    case 'call': {
      const t = typeOfCall(o.name, o.args, o.pos, ctx)
      ctx.each = false
      return t
    }
    case 'index': {
      const t = typeOfOperand(o.target, ctx)
      const key = o.key
      if (key.kind === 'each') {
        if (!isArrayType(t) && !isMapType(t)) fail(`${printOperand(o.target)} is ${t}; [*] needs an array or a map`, o.pos)
        ctx.each = true
      } else if (key.kind === 'int') {
        if (!isArrayType(t)) fail(`${printOperand(o.target)} is ${t}; [${key.value}] needs an array${isMapType(t) ? ' (index a map by name, as in ["name"])' : ''}`, o.pos)
      } else if (!isMapType(t)) {
        fail(`${printOperand(o.target)} is ${t}; [${printLiteral(key)}] needs a map${isArrayType(t) ? ' (index an array by position, as in [0])' : ''}`, o.pos)
      }
      return elementType(t)
    }
  }
}

function resolve (name: string, pos: number, ctx: CheckContext): Type {
  const { scheme } = ctx
  const entry = findField(scheme, name)
  if (entry === undefined) {
    if (!scheme.hasPhase && name.startsWith('http.')) {
      fail(`layer-7 field "${name}" is not allowed in smart firewall rules (they act on layer 3/4 packets, before any HTTP request exists)`, pos)
    }
    let hint = ''
    if (resolveField(ctx.other, name) !== undefined) hint = ` (it is a ${ctx.other.kind} field)`
    else if (functions.has(name)) hint = ` (${name} is a function: ${name}(…))`
    else {
      const near = suggest(name, [...Object.keys(scheme.fields), ...Object.keys(scheme.aliases)])
      if (near !== undefined) hint = ` (did you mean "${near}"?)`
    }
    return fail(`unknown field "${name}"${hint}`, pos)
  }
  const def = entry.def
  if (def.phase === 'response') {
    if (ctx.phase === 'request') fail(`${name} is a response-phase field; a rule with phase "request" cannot use it`, pos)
    ctx.usesResponseField = true
  }
  addField(ctx.fields, entry.rank)
  return def.type
}

/** Adds a field's rank once (a small-integer compare; see FieldEntry.rank). */
function addField (fields: number[], rank: number): void {
  for (let i = 0; i < fields.length; i++) if (fields[i] === rank) return
  fields.push(rank)
}

/** The names of the ranks collected, in sorted order (insertion sort of a few small integers). */
export function fieldNames (scheme: Scheme, ranks: number[]): string[] {
  for (let i = 1; i < ranks.length; i++) {
    const x = ranks[i]!
    let j = i - 1
    while (j >= 0 && ranks[j]! > x) { ranks[j + 1] = ranks[j]!; j-- }
    ranks[j + 1] = x
  }
  const out = new Array<string>(ranks.length)
  for (let i = 0; i < ranks.length; i++) out[i] = scheme.names[ranks[i]!]!
  return out
}

function typeOfCall (name: string, args: readonly Arg[], pos: number, ctx: CheckContext): Type {
  const def = functions.get(name)
  if (def === undefined) {
    const isField = resolveField(ctx.scheme, name) !== undefined
    const near = isField ? undefined : suggest(name, functions.keys())
    fail(`unknown function "${name}"${isField ? ` (${name} is a field)` : near !== undefined ? ` (did you mean "${near}"?)` : ''}`, pos)
  }
  const infos: ArgInfo[] = []
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    let info: ArgInfo
    if (a.kind === 'string') info = { type: 'Bytes', each: false, literal: 'string', value: a.value, pos: a.pos }
    else if (a.kind === 'int') info = { type: 'Int', each: false, literal: 'int', value: a.value, pos: a.pos }
    else if (a.kind === 'bare') {
      const t = typeOfOperand(a.operand, ctx)
      info = { type: t, each: ctx.each, literal: undefined, value: undefined, pos: a.pos }
    } else {
      info = { type: typeOfExpr(a, ctx), each: false, literal: undefined, value: undefined, pos: a.pos }
    }
    // wirefilter maps over the first argument only ("for code simplicity", and so do we).
    if (info.each && i > 0) fail(`[*] is only allowed in the first argument of ${name}()`, a.pos)
    infos.push(info)
  }
  const result = def.check(name, infos, pos)
  return infos.length > 0 && infos[0]!.each ? arrayOf(result) : result
}

/** What an ordering or `in` operand accepts: Bytes ↔ strings, Int ↔ integers, Ip ↔ addresses. */
const VALUE_KINDS = new Map<Type, readonly Literal['kind'][]>([
  ['Bytes', ['string']],
  ['Int', ['int', 'int_range']],
  ['Ip', ['ip', 'cidr', 'ip_range']],
])
const KIND_NAMES: Readonly<Record<Literal['kind'], string>> = {
  string: 'a string', int: 'an integer', int_range: 'an integer range', ip: 'an IP address', cidr: 'a CIDR', ip_range: 'an IP range',
}

function typeOfCompare (c: Compare, ctx: CheckContext): Type {
  const t = typeOfOperand(c.lhs, ctx)
  const each = ctx.each
  if (t === 'Bool') {
    const l = printOperand(c.lhs)
    fail(`${l} is Bool: use it alone as a condition ("${l}" or "not ${l}"), without "${operatorText(ctx.src, c.opPos)}"`, c.opPos)
  }
  const rhs = c.rhs
  switch (c.op) {
    case 'contains': case 'matches': case 'wildcard': case 'strict_wildcard':
      if (t !== 'Bytes') wrongOperand(c, t, 'Bytes', ctx)
      if (rhs.kind !== 'string') wrongValue(c, 'a string', rhs, ctx)
      else if (c.op === 'matches') checkPattern(rhs, ctx, 'regex')
      else if (c.op !== 'contains') checkPattern(rhs, ctx, 'wildcard')
      break
    case 'bitwise_and':
      if (t !== 'Int') wrongOperand(c, t, 'Int', ctx)
      if (rhs.kind !== 'int') wrongValue(c, 'an integer', rhs, ctx)
      break
    case 'in': {
      const allowed = VALUE_KINDS.get(t)
      if (allowed === undefined) return wrongOperand(c, t, 'Bytes, Int or Ip', ctx)
      if (rhs.kind !== 'set') break // the parser only builds sets after "in"
      for (const item of rhs.items) {
        if (!allowed.includes(item.kind)) fail(`${printOperand(c.lhs)} is ${t}, but the set holds ${KIND_NAMES[item.kind]} (${printLiteral(item)})`, item.pos)
      }
      break
    }
    default: {
      const allowed = VALUE_KINDS.get(t)
      if (allowed === undefined) return wrongOperand(c, t, 'Bytes, Int or Ip', ctx)
      if (rhs.kind === allowed[0] || rhs.kind === 'set') break // sets only follow "in"
      const l = printOperand(c.lhs)
      const v = printLiteral(rhs)
      if (allowed.includes(rhs.kind)) fail(`${KIND_NAMES[rhs.kind].replace(/^an? /, '')} ${v} needs "in": write ${l} in {${v}}`, rhs.pos)
      fail(`${l} is ${t}, but ${v} is ${KIND_NAMES[rhs.kind]}`, rhs.pos)
    }
  }
  return each ? 'Array<Bool>' : 'Bool'
}

/** `"contains" needs Bytes, ip.src is Ip`, with a hint for arrays and maps. */
function wrongOperand (c: Compare, t: Type, needs: string, ctx: CheckContext): never {
  const op = operatorText(ctx.src, c.opPos)
  const l = printOperand(c.lhs)
  const hint = isArrayType(t) || isMapType(t) ? `; index it ([0], ["name"]) or test each element with any(${l}[*] ${op} …)` : ''
  return fail(`"${op}" needs ${needs}, ${l} is ${t}${hint}`, c.opPos)
}

function wrongValue (c: Compare, needs: string, rhs: Literal | SetLit, ctx: CheckContext): never {
  return fail(`"${operatorText(ctx.src, c.opPos)}" needs ${needs}, found ${rhs.kind === 'set' ? 'a set' : KIND_NAMES[rhs.kind]}`, rhs.pos)
}

/** Validates a regex or wildcard, pointing inside the literal when its text maps 1:1 to the source. */
function checkPattern (lit: StringLit, ctx: CheckContext, what: 'regex' | 'wildcard'): void {
  const text = what === 'regex' ? bytesToText(lit.value) : lit.value
  if (text === undefined) fail('regex is not valid UTF-8', lit.pos)
  const problem = what === 'regex' ? checkRegex(text) : checkWildcard(text)
  if (problem === undefined) return
  let start = lit.pos + 1
  if (lit.raw) while (ctx.src.charCodeAt(start) === 35 /* # */) start++
  if (lit.raw) start++
  const exact = ctx.src.startsWith(text, start)
  fail(problem.message, exact ? start + problem.index : lit.pos)
}

/** The operator as written (`==`, `eq`, `strict wildcard`…), for messages. */
function operatorText (src: string, at: number): string {
  const m = /^(?:strict\s+wildcard|[a-z_]+|==|!=|<=|>=|[<>~&])/.exec(src.slice(at, at + 40))
  return m === null ? '?' : m[0].replace(/\s+/, ' ')
}
