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
import { CIDR_KIND, INT_KIND, INT_RANGE_KIND, IP_KIND, IP_RANGE_KIND, STRING_KIND, type Compare, type IndexKey, type LogicalOp, type Literal, type Operand, type SetLit, type StringLit } from './ast.js'
import { fail, suggest } from './diagnostic.js'
import { functions, type ArgInfo, type FunctionDef } from './functions.js'
import { bytesToText, regexSourceOffset } from './lexer.js'
import { printLiteral, printOperand } from './printer.js'
import { checkRegex } from './regex.js'
import { arrayOf, elementType, isArrayType, isMapType, resolveField, type FieldEntry, type Phase, type Scheme, type Type } from './types.js'
import { TEXT } from './text.js'
import { checkWildcard } from './wildcard.js'

export interface CheckContext {
  readonly src: string
  readonly scheme: Scheme
  /** The other kind's scheme, to say "it is a smart_firewall_rule field". */
  readonly other: Scheme
  readonly phase: Phase | undefined
  /** The scheme's fields by word id (words.ts). */
  readonly fieldOf: ReadonlyArray<FieldEntry | undefined>
  /**
   * The fields used, as a set of ranks (FieldEntry.rank): bit `rank & 31` of `fields[rank >>> 5]`.
   * A bit set records a use, a repeat included, with no test; a list searched for repeats and
   * sorted at the end was measured at 5–10 % of the whole check (its compares depend on the
   * data, so they are mispredicted). Zeroed by the caller before the check.
   */
  readonly fields: Int32Array
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
  const rank = entry.rank
  ctx.fields[rank >>> 5]! |= 1 << (rank & 31)
  return def.type
}

/**
 * The names of the fields in the set of ranks `used` (CheckContext.fields): in rank order,
 * which is the names' sorted order, so no sort is needed.
 */
export function fieldNames (scheme: Scheme, used: Int32Array): string[] {
  let count = 0
  for (let k = 0; k < used.length; k++) count += bitCount(used[k]!)
  // Allocated at its size: pushing onto [] allocates a backing store of 17 slots, then grows it.
  const out = new Array<string>(count)
  let n = 0
  for (let k = 0; k < used.length; k++) {
    // Lowest set bit first: `bits & -bits` isolates it, `bits &= bits - 1` clears it.
    for (let bits = used[k]!; bits !== 0; bits &= bits - 1) out[n++] = scheme.names[(k << 5) | (31 - Math.clz32(bits & -bits))]!
  }
  return out
}

/** Set bits in a 32-bit integer (the classic SWAR count: no loop, no branch). */
function bitCount (x: number): number {
  x = x - ((x >>> 1) & 0x55555555)
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333)
  return Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24
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

/**
 * The kinds (ast.ts KIND bits) an ordering or `in` operand of type `t` accepts, as valueKinds;
 * 0 for other types.
 */
function acceptedKinds (t: Type): number {
  return t === 'Bytes' ? STRING_KIND : t === 'Int' ? INT_KIND | INT_RANGE_KIND : t === 'Ip' ? IP_KIND | CIDR_KIND | IP_RANGE_KIND : 0
}

/** The kind an ordering operator (eq, lt…) takes a single value of, for an operand of type `t`. */
function orderedKind (t: Type): number {
  return t === 'Bytes' ? STRING_KIND : t === 'Int' ? INT_KIND : IP_KIND
}

/**
 * A comparison whose left-hand side is of type `t`; its type is Bool, or Array<Bool> over `[*]`.
 * `kinds`: what the parser read as the value (ast.ts KIND bits: one for a value, all those of
 * its items for a set); `valueAt`: Cursor.valueAt for a string value. The literals' own `kind`
 * is read only to word a message.
 */
export function typeOfCompare (ctx: CheckContext, c: Compare, t: Type, each: boolean, kinds: number, valueAt: number): Type {
  if (t === 'Bool') {
    const l = printOperand(c.lhs)
    fail(`${l} is Bool: use it alone as a condition ("${l}" or "not ${l}"), without "${operatorText(ctx.src, c.opPos)}"`, c.opPos)
  }
  const rhs = c.rhs
  switch (c.op) {
    case 'contains': case 'matches': case 'wildcard': case 'strict_wildcard':
      if (t !== 'Bytes') wrongOperand(c, t, 'Bytes', ctx)
      if (kinds !== STRING_KIND) wrongValue(c, 'a string', rhs, ctx)
      // A string, said `kinds`: the parser reads a set only after "in".
      else if (c.op === 'matches') checkPattern(rhs as StringLit, ctx, 'regex', valueAt)
      else if (c.op !== 'contains') checkPattern(rhs as StringLit, ctx, 'wildcard', valueAt)
      break
    case 'bitwise_and':
      if (t !== 'Int') wrongOperand(c, t, 'Int', ctx)
      if (kinds !== INT_KIND) wrongValue(c, 'an integer', rhs, ctx)
      break
    case 'in': {
      const allowed = acceptedKinds(t)
      if (allowed === 0) return wrongOperand(c, t, 'Bytes, Int or Ip', ctx)
      if ((kinds & ~allowed) === 0 || rhs.kind !== 'set') break // the parser only builds sets after "in"
      // Some item is of a kind not allowed: the first one is the one to report.
      const names = valueKinds(t)!
      for (const item of rhs.items) {
        if (!names.includes(item.kind)) fail(`${printOperand(c.lhs)} is ${t}, but the set holds ${KIND_NAMES[item.kind]} (${printLiteral(item)})`, item.pos)
      }
      break
    }
    default: {
      const allowed = valueKinds(t)
      if (allowed === undefined) return wrongOperand(c, t, 'Bytes, Int or Ip', ctx)
      if (kinds === orderedKind(t) || rhs.kind === 'set') break // sets only follow "in"
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

/**
 * Validates a regex or wildcard, pointing inside the literal when its text maps 1:1 to the
 * source. When the value is a run of the text as is (`valueAt` ≥ 0, see Cursor.valueAt), it is
 * ASCII, so its own text, and the checks read its bytes where the lexer left them.
 */
function checkPattern (lit: StringLit, ctx: CheckContext, what: 'regex' | 'wildcard', valueAt: number): void {
  const inText = valueAt >= 0
  // A regex's bytes are the UTF-8 of its source text (Cursor.readRegex), so they decode.
  const text = what === 'regex' && !inText ? bytesToText(lit.value)! : lit.value
  const problem = what === 'regex'
    ? (inText ? checkRegex(text, TEXT, valueAt) : checkRegex(text))
    : (inText ? checkWildcard(text, TEXT, valueAt) : checkWildcard(text))
  if (problem === undefined) return
  let start = lit.pos + 1
  if (lit.raw) while (ctx.src.charCodeAt(start) === 35 /* # */) start++
  if (lit.raw) start++
  if (what === 'regex' && !lit.raw) fail(problem.message, regexSourceOffset(ctx.src, start, problem.index))
  const exact = ctx.src.startsWith(text, start)
  fail(problem.message, exact ? start + problem.index : lit.pos)
}

/** The operator as written (`==`, `eq`, `strict wildcard`…), for messages. */
function operatorText (src: string, at: number): string {
  const m = /^(?:strict\s+wildcard|[a-z_]+|==|!=|<=|>=|[<>~&])/.exec(src.slice(at, at + 40))
  return m === null ? '?' : m[0].replace(/\s+/, ' ')
}
