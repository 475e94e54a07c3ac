/**
 * Recursive-descent parser for the wirefilter / Cloudflare Rules language, which also types
 * each node as it builds it (typing.ts holds the rules) when given a check context:
 *
 *   expr    := xor ( ("or" | "||") xor )*          lowest precedence
 *   xor     := and ( ("xor" | "^^") and )*
 *   and     := unary ( ("and" | "&&") unary )*
 *   unary   := ("not" | "!") unary | simple
 *   simple  := "(" expr ")" | operand [ cmp-op value | "in" set ]
 *   operand := name [ "(" args ")" ] ( "[" ( "*" | int | string ) "]" )*
 *
 * `not` binds to one simple expression (`not a and b` is `(not a) and b`), as in wirefilter.
 * Nesting (parentheses, `not`, calls) is capped so that no input can exhaust the stack.
 *
 * One pass, no second walk over the tree: the type of what was just parsed travels in #type
 * (and #each for a `[*]` operand) instead of in a result object, since it is set per node.
 * Without a context (parseExpression) the same code checks the syntax only.
 */
import type { Arg, Compare, CompareOp, Expr, IndexKey, LogicalOp, Operand } from './ast.js'
import { fail, locate } from './diagnostic.js'
import type { ArgInfo } from './functions.js'
import { Cursor, unexpected } from './lexer.js'
import { parseBareValue, parseInteger } from './literals.js'
import type { Type } from './types.js'
import { checkCombination, checkRoot, requireFunction, typeOfCall, typeOfCompare, typeOfCondition, typeOfField, typeOfIndex, type CheckContext } from './typing.js'
import { readSet, readValue } from './values.js'
import { compareOpOf, functionOf, isKeyword, KEYWORDS, logicalOpOf, lowercaseHint, NOT_WORD, STRICT_WORD, vocabulary, WILDCARD_WORD } from './words.js'

/** Deepest nesting of parentheses, `not` and function calls; real rules stay under 10. */
export const MAX_DEPTH = 32

/**
 * Binding strength of a logical operator. Kept here, next to its only caller, rather than in
 * words.ts: the climbing loop asks for it several times per operator, and under tsx (tests,
 * benches: modules compiled to CommonJS) every call into another module goes through a getter.
 */
function precedence (op: LogicalOp): number {
  return op === 'and' ? 2 : op === 'xor' ? 1 : 0
}

/** Parses expression text into an AST, checking the syntax only; throws ExpressionError. */
export function parseExpression (src: string): Expr {
  return new Parser(src, undefined).parse()
}

/** Parses and type-checks expression text against `ctx` in one pass; throws ExpressionError. */
export function parseAndCheck (ctx: CheckContext): Expr {
  return new Parser(ctx.src, ctx).parse()
}

/** The types of no arguments (shared: an empty array each time would be an allocation). */
const NO_ARGS: readonly ArgInfo[] = Object.freeze([])

class Parser {
  readonly #c: Cursor
  /** Set when typing; every typing step is guarded by it. */
  readonly #ctx: CheckContext | undefined
  #depth = 0
  #opLength = 0
  /** Memo of the logical operator after the cursor: the climbing loops ask for it repeatedly. */
  #lookPos = -1
  #lookOp: LogicalOp | undefined = undefined
  #lookLength = 0
  /**
   * The type of the expression or operand just parsed (typing only). An operand that is a
   * function's whole argument keeps its own type; anywhere else a lone operand is a condition.
   */
  #type: Type = 'Bool'
  /** Whether the operand just parsed maps over an array or map (`[*]`). */
  #each = false
  /** The types of the arguments of the call just parsed (typing only; see #args). */
  #argInfos: readonly ArgInfo[] = NO_ARGS

  constructor (src: string, ctx: CheckContext | undefined) {
    this.#c = new Cursor(src)
    this.#ctx = ctx
  }

  parse (): Expr {
    const c = this.#c
    c.skipSpace()
    if (c.atEnd()) fail('empty expression', c.pos)
    const e = this.#expr(false)
    c.skipSpace()
    if (!c.atEnd()) unexpected(c, 'expected "and", "or", "xor" or the end of the expression')
    if (this.#ctx !== undefined) checkRoot(this.#type, e.pos)
    return e
  }

  /** A full expression: unary operands joined by logical operators. `arg`: a function's argument. */
  #expr (arg: boolean): Expr {
    const c = this.#c
    c.skipSpace()
    const pos = c.pos
    return this.#climb(this.#unary(arg), pos, 0)
  }

  /**
   * Precedence climbing (one loop per precedence change instead of one call per level per
   * operand). Runs of the same operator gather into one n-ary node, as in wirefilter.
   * `first` starts at `firstPos`, and its type is in #type.
   */
  #climb (first: Expr, firstPos: number, minPrecedence: number): Expr {
    const c = this.#c
    const firstType = this.#type
    let lhs = first
    let items: Expr[] | undefined
    let built: LogicalOp | undefined
    let op = this.#peekLogical()
    while (op !== undefined && precedence(op) >= minPrecedence) {
      const current = op
      c.pos += this.#lookLength
      c.skipSpace()
      const rhsPos = c.pos
      let rhs = this.#unary(false)
      op = this.#peekLogical()
      while (op !== undefined && precedence(op) > precedence(current)) {
        rhs = this.#climb(rhs, rhsPos, precedence(current) + 1)
        op = this.#peekLogical()
      }
      if (this.#ctx !== undefined) checkCombination(current, firstType, this.#type, rhsPos)
      // `built` is the operator of the node this loop is growing (groups are wrapped, and the
      // nested climb returns tighter-binding operators only), so a run of it extends that node.
      if (items !== undefined && built === current) {
        items.push(rhs)
      } else {
        items = [lhs, rhs]
        built = current
        lhs = { kind: 'logical', op: current, items, pos: firstPos }
      }
    }
    this.#type = firstType
    return lhs
  }

  /** The logical operator after the cursor (after spaces), without consuming it; memoised. */
  #peekLogical (): LogicalOp | undefined {
    const c = this.#c
    c.skipSpace()
    if (this.#lookPos !== c.pos) {
      this.#lookPos = c.pos
      this.#lookOp = undefined
      const ch = c.peek()
      if (ch === 38 /* & */ || ch === 124 /* | */ || ch === 94 /* ^ */) {
        if (c.peek(1) === ch) {
          this.#lookOp = ch === 38 ? 'and' : ch === 124 ? 'or' : 'xor'
          this.#lookLength = 2
        }
      } else {
        const length = c.scanLogicalOp()
        if (length !== 0) {
          this.#lookOp = ch === 97 /* a */ ? 'and' : ch === 111 /* o */ ? 'or' : 'xor'
          this.#lookLength = length
        }
      }
    }
    return this.#lookOp
  }

  /** A unary expression at the cursor, which is past any spaces. */
  #unary (arg: boolean): Expr {
    const c = this.#c
    const pos = c.pos
    const ch = c.peek()
    const bang = ch === 33 /* ! */ && c.peek(1) !== 61 /* = */
    if (bang || (ch === 110 /* n */ && c.atWord(NOT_WORD))) {
      c.pos += bang ? 1 : 3
      this.#enter(pos)
      c.skipSpace()
      const inner = this.#unary(false)
      this.#depth--
      return { kind: 'not', arg: inner, pos }
    }
    return this.#simple(arg)
  }

  #simple (arg: boolean): Expr {
    const c = this.#c
    const pos = c.pos
    if (c.peek() === 40 /* ( */) {
      this.#enter(pos)
      c.pos++
      const expr = this.#expr(false)
      c.skipSpace()
      if (c.peek() !== 41 /* ) */) {
        const { line, column } = locate(c.src, pos)
        unexpected(c, `expected ")" to close the "(" opened at ${line}:${column}`)
      }
      c.pos++
      this.#depth--
      return { kind: 'group', expr, pos }
    }
    const end = c.scanWord()
    const word = c.word
    const first = c.peek()
    // Only a capitalised word can be `AND`, `Not`… (names are lowercase): the slice and the set
    // lookup, which hashes it, are kept off the common path.
    if (end === pos || isKeyword[word] === true || (first >= 65 && first <= 90 && KEYWORDS.has(c.src.slice(pos, end).toLowerCase()))) {
      lowercaseHint(c.src.slice(pos, end), pos)
      unexpected(c, 'expected a field, a function or "("')
    }
    c.pos = end
    const operand = this.#operand(pos, end, word)
    const op = this.#compareOp()
    const ctx = this.#ctx
    if (op === undefined) {
      // A function's whole argument is a value (`lower(http.host)`); anything else is a condition.
      if (ctx !== undefined && !(arg && this.#peekLogical() === undefined)) this.#type = typeOfCondition(operand, this.#type, this.#each, pos)
      return { kind: 'bare', operand, pos }
    }
    const opPos = c.pos
    c.pos += this.#opLength
    c.skipSpace()
    if (op === 'bitwise_and' && c.codes[opPos] === 38 /* & */) {
      const d = c.peek()
      if (!((d >= 48 && d <= 57) || d === 45 /* - */)) fail('a single "&" is bitwise_and (as in tcp.flags & 0x02); the logical operator is "&&"', opPos)
    }
    const rhs = op === 'in' ? readSet(c) : readValue(c, op)
    const node: Compare = { kind: 'compare', lhs: operand, op, rhs, pos, opPos }
    if (ctx !== undefined) this.#type = typeOfCompare(ctx, node, this.#type, this.#each, c.kinds, c.valueAt)
    return node
  }

  /**
   * The operand whose name, src[pos, end) with vocabulary id `word`, has just been read; types
   * it when typing. A known word's string (words.ts) is the AST's name: no slice for it.
   */
  #operand (pos: number, end: number, word: number): Operand {
    const c = this.#c
    const ctx = this.#ctx
    const name = word !== 0 ? vocabulary.words[word]! : c.src.slice(pos, end)
    let operand: Operand
    c.skipSpace()
    if (c.peek() === 40 /* ( */) {
      const def = ctx === undefined ? undefined : requireFunction(ctx, functionOf[word], name, pos)
      operand = { kind: 'call', name, args: this.#args(name, pos, def !== undefined), pos }
      if (def !== undefined) this.#type = typeOfCall(def, name, this.#argInfos, pos)
      c.skipSpace()
    } else {
      operand = { kind: 'field', name, pos }
      if (ctx !== undefined) this.#type = typeOfField(ctx, ctx.fieldOf[word], name, pos)
    }
    this.#each = false
    // The cursor is past spaces here and after each index, as #compareOp expects.
    for (; c.peek() === 91 /* [ */; c.skipSpace()) {
      const at = c.pos
      c.pos++
      c.skipSpace()
      const key = this.#indexKey()
      c.skipSpace()
      if (c.peek() !== 93 /* ] */) unexpected(c, 'expected "]"')
      c.pos++
      if (ctx !== undefined) {
        this.#type = typeOfIndex(operand, this.#type, key, at)
        if (key.kind === 'each') this.#each = true
      }
      operand = { kind: 'index', target: operand, key, pos: at }
    }
    return operand
  }

  /** `*`, a quoted map key or an array position, after `[`. */
  #indexKey (): IndexKey {
    const c = this.#c
    if (c.peek() === 42 /* * */) {
      c.pos++
      return { kind: 'each' }
    }
    if (c.atString()) return c.readString()
    const p = c.pos
    const end = c.bareEnd()
    if (end === p) unexpected(c, 'expected *, an array position or a quoted map key')
    c.pos = end
    const value = parseInteger(c.src, p, end)
    if (value < 0 || value > 0xffffffff) fail(`array position ${c.src.slice(p, end)} is out of range (0–4294967295)`, p)
    return { kind: 'int', value, pos: p }
  }

  /**
   * The arguments of a call, after its name. When `typing`, their types are left in #argInfos
   * (read before another call's arguments are parsed: a nested call's are parsed, and read,
   * while its own argument is).
   *
   * The arrays start at the first argument (`[arg]`): most calls take one, and pushing onto
   * `[]` would allocate a backing store of 17 slots, then grow it.
   */
  #args (name: string, pos: number, typing: boolean): Arg[] {
    const c = this.#c
    this.#enter(pos)
    c.pos++ // (
    c.skipSpace()
    if (c.peek() === 41 /* ) */) {
      c.pos++
      this.#depth--
      this.#argInfos = NO_ARGS
      return []
    }
    let args: Arg[] | undefined
    let infos: ArgInfo[] | undefined
    for (;;) {
      c.skipSpace()
      const at = c.pos
      const ch = c.peek()
      let arg: Arg
      let info: ArgInfo | undefined
      if (c.atString()) {
        const s = c.readString()
        arg = s
        if (typing) info = { type: 'Bytes', each: false, literal: 'string', value: s.value, pos: at }
      } else if ((ch >= 48 && ch <= 57) || (ch === 45 /* - */ && c.peek(1) >= 48 && c.peek(1) <= 57)) {
        const end = c.bareEnd()
        c.pos = end
        const lit = parseBareValue(c.src, at, end)
        if (lit.kind !== 'int') fail(`${name}() takes strings and integers as literal arguments`, at)
        arg = lit
        if (typing) info = { type: 'Int', each: false, literal: 'int', value: lit.value, pos: at }
      } else {
        const e = this.#expr(true)
        arg = e
        if (typing) {
          const each = e.kind === 'bare' && this.#each
          // wirefilter maps over the first argument only ("for code simplicity", and so do we).
          if (each && args !== undefined) fail(`[*] is only allowed in the first argument of ${name}()`, at)
          info = { type: this.#type, each, literal: undefined, value: undefined, pos: at }
        }
      }
      if (args === undefined) {
        args = [arg]
        if (info !== undefined) infos = [info]
      } else {
        args.push(arg)
        if (info !== undefined) infos!.push(info)
      }
      c.skipSpace()
      if (c.peek() === 44 /* , */) { c.pos++; continue }
      if (c.peek() === 41 /* ) */) { c.pos++; break }
      unexpected(c, `expected "," or ")" in the arguments of ${name}()`)
    }
    this.#depth--
    if (infos !== undefined) this.#argInfos = infos
    return args
  }

  /**
   * The comparison operator at the cursor (which #operand leaves past spaces), without consuming
   * it; its length is left in #opLength (no result object: this runs once per clause).
   */
  #compareOp (): CompareOp | undefined {
    const c = this.#c
    const ch = c.peek()
    const next = c.peek(1)
    this.#opLength = 2
    switch (ch) {
      case 61: if (next === 61) return 'eq'; break // ==
      case 33: if (next === 61) return 'ne'; break // !=
      case 60: if (next === 61) return 'le'; this.#opLength = 1; return 'lt' // < <=
      case 62: if (next === 61) return 'ge'; this.#opLength = 1; return 'gt' // > >=
      case 126: this.#opLength = 1; return 'matches' // ~
      case 38: if (next === 38) return undefined; this.#opLength = 1; return 'bitwise_and' // & (not &&)
    }
    const end = c.scanWord()
    if (end === c.pos) {
      if (c.atString() || (ch >= 48 && ch <= 57) || ch === 123 /* { */) {
        unexpected(c, 'expected an operator (eq, contains, in, …) before this value')
      }
      return undefined
    }
    this.#opLength = end - c.pos
    const op = compareOpOf[c.word]
    if (op !== undefined) return op
    // A logical operator ends the operand: it stands alone, as a condition or an argument.
    if (logicalOpOf[c.word] !== undefined) return undefined
    if (c.word === STRICT_WORD) {
      const save = c.pos
      c.pos = end
      c.skipSpace()
      const ok = c.atWord(WILDCARD_WORD)
      this.#opLength = c.pos + 8 - save
      c.pos = save
      if (!ok) fail('expected "wildcard" after "strict"', end)
      return 'strict_wildcard'
    }
    const word = c.src.slice(c.pos, end)
    lowercaseHint(word, c.pos)
    // A dotted word is a field name: most likely a missing operator or comma before it.
    if (word.indexOf('.') !== -1) return fail(`expected an operator (eq, contains, in, …), found "${word}"`, c.pos)
    return fail(`unknown operator "${word}"`, c.pos)
  }

  #enter (pos: number): void {
    if (++this.#depth > MAX_DEPTH) fail(`expression nests deeper than ${MAX_DEPTH} levels`, pos)
  }
}
