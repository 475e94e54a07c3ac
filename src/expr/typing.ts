/**
 * The type rules: fields against the rule kind's scheme, every operator against its operand
 * types, function signatures, indexing, regex and wildcard patterns, and the rule's phase.
 * Each rule fails with ExpressionError at the first problem, pointing at the operator, value
 * or name that is wrong, with a message that says what to write instead.
 *
 * The parser applies these rules as it builds each node (a node's type is known the moment
 * its last child is parsed), so there is no second walk over the tree. It calls them in the
 * order a walk would (children before parents, left to right), so the first type error found
 * is the one a walk would find; check.ts makes syntax errors win over it, as they would if
 * the whole text were parsed first.
 *
 * Map-each (`[*]`) follows wirefilter: a comparison on a map-each operand yields Array<Bool>,
 * which only any()/all() (or a logical operator between two such arrays) can consume.
 *
 * Types are written as literals ('Bool', not types.ts's BOOL) on purpose: tsx, which runs the
 * tests and benches, compiles modules to CommonJS, where each use of an imported binding is a
 * getter call. The compiler checks every literal against the Type union.
 */
import type { Compare, IndexKey, LogicalOp, Literal, Operand, SetLit, StringLit } from './ast.js'
import { fail, suggest } from './diagnostic.js'
import { functions, type ArgInfo, type FunctionDef } from './functions.js'
import { bytesToText } from './lexer.js'
import { printLiteral, printOperand } from './printer.js'
import { checkRegex } from './regex.js'
import { arrayOf, elementType, isArrayType, isMapType, resolveField, type FieldEntry, type Phase, type Scheme, type Type } from './types.js'
import { checkWildcard } from './wildcard.js'

export interface CheckContext {
  readonly src: string
  readonly scheme: Scheme
  /** The other kind's scheme, to say "it is a smart_firewall_rule field". */
  readonly other: Scheme
  readonly phase: Phase | undefined
  /** The scheme's fields by word id (words.ts). */
  readonly fieldOf: ReadonlyArray<FieldEntry | undefined>
  /** Ranks (FieldEntry.rank) of the fields used, unique, in order of first use. */
  readonly fields: number[]
  usesResponseField: boolean
}

/** The whole expression must be one Bool. */
export function checkRoot (t: Type, pos: number): void {
  if (t !== 'Bool') fail(`the expression is ${t}: wrap the [*] comparison in any(…) or all(…)`, pos)
}

/** An operand standing alone as a condition (`ssl`, `tcp.flags.syn`) must be Bool. */
export function typeOfCondition (operand: Operand, t: Type, each: boolean, pos: number): Type {
  if (t === 'Bool') return each ? 'Array<Bool>' : 'Bool'
  return fail(`${printOperand(operand)} is ${t}, not a condition: compare it with an operator (eq, contains, in, …)`, pos)
}

/** Items of one logical node must all have the type of its first item. */
export function checkCombination (op: LogicalOp, first: Type, t: Type, pos: number): void {
  if (t !== first) fail(`"${op}" cannot combine ${first} with ${t}: wrap the [*] comparison in any(…) or all(…)`, pos)
}

/**
 * The type of the field `name`, whose entry the parser has looked up (undefined: not a field
 * of the scheme); records its use and checks it against the phase.
 */
export function typeOfField (ctx: CheckContext, entry: FieldEntry | undefined, name: string, pos: number): Type {
  const { scheme } = ctx
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

/** The element type of `target[key]`, whose target is of type `t`. */
export function typeOfIndex (target: Operand, t: Type, key: IndexKey, pos: number): Type {
  if (key.kind === 'each') {
    if (!isArrayType(t) && !isMapType(t)) fail(`${printOperand(target)} is ${t}; [*] needs an array or a map`, pos)
  } else if (key.kind === 'int') {
    if (!isArrayType(t)) fail(`${printOperand(target)} is ${t}; [${key.value}] needs an array${isMapType(t) ? ' (index a map by name, as in ["name"])' : ''}`, pos)
  } else if (!isMapType(t)) {
    fail(`${printOperand(target)} is ${t}; [${printLiteral(key)}] needs a map${isArrayType(t) ? ' (index an array by position, as in [0])' : ''}`, pos)
  }
  return elementType(t)
}

/**
 * The definition of the function `name`, which the parser has looked up (undefined: no such
 * function); checked before its arguments, as a walk would.
 */
export function requireFunction (ctx: CheckContext, def: FunctionDef | undefined, name: string, pos: number): FunctionDef {
  if (def === undefined) {
    const isField = resolveField(ctx.scheme, name) !== undefined
    const near = isField ? undefined : suggest(name, functions.keys())
    return fail(`unknown function "${name}"${isField ? ` (${name} is a field)` : near !== undefined ? ` (did you mean "${near}"?)` : ''}`, pos)
  }
  return def
}

/** The result type of a call whose arguments are typed; an array when the first maps over `[*]`. */
export function typeOfCall (def: FunctionDef, name: string, args: readonly ArgInfo[], pos: number): Type {
  const result = def.check(name, args, pos)
  return args.length > 0 && args[0]!.each ? arrayOf(result) : result
}

/**
 * What an ordering or `in` operand accepts: Bytes ↔ strings, Int ↔ integers, Ip ↔ addresses;
 * undefined for other types. (Compares, not a Map: types are interned, see types.ts.)
 */
function valueKinds (t: Type): readonly Literal['kind'][] | undefined {
  return t === 'Bytes' ? BYTES_VALUES : t === 'Int' ? INT_VALUES : t === 'Ip' ? IP_VALUES : undefined
}
const BYTES_VALUES: readonly Literal['kind'][] = ['string']
const INT_VALUES: readonly Literal['kind'][] = ['int', 'int_range']
const IP_VALUES: readonly Literal['kind'][] = ['ip', 'cidr', 'ip_range']
const KIND_NAMES: Readonly<Record<Literal['kind'], string>> = {
  string: 'a string', int: 'an integer', int_range: 'an integer range', ip: 'an IP address', cidr: 'a CIDR', ip_range: 'an IP range',
}

/** A comparison whose left-hand side is of type `t`; its type is Bool, or Array<Bool> over `[*]`. */
export function typeOfCompare (ctx: CheckContext, c: Compare, t: Type, each: boolean): Type {
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
      const allowed = valueKinds(t)
      if (allowed === undefined) return wrongOperand(c, t, 'Bytes, Int or Ip', ctx)
      if (rhs.kind !== 'set') break // the parser only builds sets after "in"
      for (const item of rhs.items) {
        if (!allowed.includes(item.kind)) fail(`${printOperand(c.lhs)} is ${t}, but the set holds ${KIND_NAMES[item.kind]} (${printLiteral(item)})`, item.pos)
      }
      break
    }
    default: {
      const allowed = valueKinds(t)
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
