/**
 * Recursive-descent parser for the wirefilter / Cloudflare Rules language. It knows the syntax
 * only; field names, types and functions are the checker's business (typing.ts).
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
 */
import type { Arg, CompareOp, Expr, IndexKey, LogicalOp, Operand } from './ast.js'
import { fail, locate } from './diagnostic.js'
import { Cursor } from './lexer.js'
import { parseBareValue, parseInteger } from './literals.js'
import { isKeyword, KEYWORDS, lowercaseHint, operatorWord, unexpected } from './operators.js'
import { readSet, readValue } from './values.js'

/** Deepest nesting of parentheses, `not` and function calls; real rules stay under 10. */
export const MAX_DEPTH = 32

/**
 * Binding strength of a logical operator. Kept here, next to its only caller, rather than in
 * operators.ts: the climbing loop asks for it several times per operator, and under tsx (tests,
 * benches: modules compiled to CommonJS) every call into another module goes through a getter.
 */
function precedence (op: LogicalOp): number {
  return op === 'and' ? 2 : op === 'xor' ? 1 : 0
}

/** Parses expression text into an AST; throws ExpressionError on a syntax error. */
export function parseExpression (src: string): Expr {
  return new Parser(src).parse()
}

class Parser {
  readonly #c: Cursor
  #depth = 0
  #opLength = 0
  /** Memo of the logical operator after the cursor: the climbing loops ask for it repeatedly. */
  #lookPos = -1
  #lookOp: LogicalOp | undefined = undefined
  #lookLength = 0

  constructor (src: string) {
    this.#c = new Cursor(src)
  }

  parse (): Expr {
    const c = this.#c
    c.skipSpace()
    if (c.atEnd()) fail('empty expression', c.pos)
    const e = this.#expr()
    c.skipSpace()
    if (!c.atEnd()) unexpected(c, 'expected "and", "or", "xor" or the end of the expression')
    return e
  }

  /** A full expression: unary operands joined by logical operators. */
  #expr (): Expr {
    return this.#climb(this.#unary(), 0)
  }

  /**
   * Precedence climbing (one loop per precedence change instead of one call per level per
   * operand). Runs of the same operator gather into one n-ary node, as in wirefilter.
   */
  #climb (first: Expr, minPrecedence: number): Expr {
    let lhs = first
    let items: Expr[] | undefined
    let op = this.#peekLogical()
    while (op !== undefined && precedence(op) >= minPrecedence) {
      const current = op
      this.#c.pos += this.#lookLength
      let rhs = this.#unary()
      op = this.#peekLogical()
      while (op !== undefined && precedence(op) > precedence(current)) {
        rhs = this.#climb(rhs, precedence(current) + 1)
        op = this.#peekLogical()
      }
      // A logical lhs of the same operator can only be the node this loop is growing: groups
      // are wrapped, and the nested climb returns tighter-binding operators only.
      if (items !== undefined && lhs.kind === 'logical' && lhs.op === current) {
        items.push(rhs)
      } else {
        items = [lhs, rhs]
        lhs = { kind: 'logical', op: current, items, pos: lhs.pos }
      }
    }
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
      } else if (ch === 97 /* a */ || ch === 111 /* o */ || ch === 120 /* x */) {
        const len = c.wordEnd() - c.pos
        const op = len === 3 && c.src.startsWith('and', c.pos) ? 'and' : len === 2 && c.src.startsWith('or', c.pos) ? 'or' : len === 3 && c.src.startsWith('xor', c.pos) ? 'xor' : undefined
        if (op !== undefined) {
          this.#lookOp = op
          this.#lookLength = len
        }
      }
    }
    return this.#lookOp
  }

  #unary (): Expr {
    const c = this.#c
    c.skipSpace()
    const pos = c.pos
    const bang = c.peek() === 33 /* ! */ && c.peek(1) !== 61 /* = */
    if (bang || (c.peek() === 110 /* n */ && c.peekWord() === 'not')) {
      c.pos += bang ? 1 : 3
      this.#enter(pos)
      const arg = this.#unary()
      this.#depth--
      return { kind: 'not', arg, pos }
    }
    return this.#simple()
  }

  #simple (): Expr {
    const c = this.#c
    const pos = c.pos
    if (c.peek() === 40 /* ( */) {
      this.#enter(pos)
      c.pos++
      c.skipSpace()
      const expr = this.#expr()
      c.skipSpace()
      if (c.peek() !== 41 /* ) */) {
        const { line, column } = locate(c.src, pos)
        unexpected(c, `expected ")" to close the "(" opened at ${line}:${column}`)
      }
      c.pos++
      this.#depth--
      return { kind: 'group', expr, pos }
    }
    const name = c.readWord()
    const first = name.charCodeAt(0)
    // Only a capitalised word can be `AND`, `Not`… (names are lowercase): the set lookup, which
    // hashes the word, is kept off the common path.
    if (name === '' || isKeyword(name) || (first >= 65 && first <= 90 && KEYWORDS.has(name.toLowerCase()))) {
      c.pos = pos
      lowercaseHint(name, c.pos)
      unexpected(c, 'expected a field, a function or "("')
    }
    const operand = this.#operand(name, pos)
    const op = this.#compareOp()
    if (op === undefined) return { kind: 'bare', operand, pos }
    const opPos = c.pos
    c.pos += this.#opLength
    c.skipSpace()
    if (op === 'bitwise_and' && c.src.charCodeAt(opPos) === 38 /* & */) {
      const d = c.peek()
      if (!((d >= 48 && d <= 57) || d === 45 /* - */)) fail('a single "&" is bitwise_and (as in tcp.flags & 0x02); the logical operator is "&&"', opPos)
    }
    const rhs = op === 'in' ? readSet(c) : readValue(c, op)
    return { kind: 'compare', lhs: operand, op, rhs, pos, opPos }
  }

  /** The operand whose name has just been read. */
  #operand (name: string, pos: number): Operand {
    const c = this.#c
    let operand: Operand = { kind: 'field', name, pos }
    c.skipSpace()
    if (c.peek() === 40 /* ( */) operand = { kind: 'call', name, args: this.#args(name, pos), pos }
    for (c.skipSpace(); c.peek() === 91 /* [ */; c.skipSpace()) {
      const at = c.pos
      c.pos++
      c.skipSpace()
      let key: IndexKey
      if (c.peek() === 42 /* * */) {
        c.pos++
        key = { kind: 'each' }
      } else if (c.atString()) {
        key = c.readString()
      } else {
        const p = c.pos
        const token = c.readBare()
        if (token === '') unexpected(c, 'expected *, an array position or a quoted map key')
        const value = parseInteger(token, p)
        if (value < 0 || value > 0xffffffff) fail(`array position ${token} is out of range (0–4294967295)`, p)
        key = { kind: 'int', value, pos: p }
      }
      c.skipSpace()
      if (c.peek() !== 93 /* ] */) unexpected(c, 'expected "]"')
      c.pos++
      operand = { kind: 'index', target: operand, key, pos: at }
    }
    return operand
  }

  #args (name: string, pos: number): Arg[] {
    const c = this.#c
    this.#enter(pos)
    c.pos++ // (
    const args: Arg[] = []
    c.skipSpace()
    if (c.peek() === 41 /* ) */) {
      c.pos++
      this.#depth--
      return args
    }
    for (;;) {
      c.skipSpace()
      const at = c.pos
      const ch = c.peek()
      if (c.atString()) {
        args.push(c.readString())
      } else if ((ch >= 48 && ch <= 57) || (ch === 45 /* - */ && c.peek(1) >= 48 && c.peek(1) <= 57)) {
        const lit = parseBareValue(c.readBare(), at)
        if (lit.kind !== 'int') fail(`${name}() takes strings and integers as literal arguments`, at)
        args.push(lit)
      } else {
        args.push(this.#expr())
      }
      c.skipSpace()
      if (c.peek() === 44 /* , */) { c.pos++; continue }
      if (c.peek() === 41 /* ) */) { c.pos++; break }
      unexpected(c, `expected "," or ")" in the arguments of ${name}()`)
    }
    this.#depth--
    return args
  }

  /**
   * The comparison operator at the cursor (after spaces), without consuming it; its length is
   * left in #opLength (no result object: this runs once per clause).
   */
  #compareOp (): CompareOp | undefined {
    const c = this.#c
    c.skipSpace()
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
    const end = c.wordEnd()
    if (end === c.pos) {
      if (c.atString() || (ch >= 48 && ch <= 57) || ch === 123 /* { */) {
        unexpected(c, 'expected an operator (eq, contains, in, …) before this value')
      }
      return undefined
    }
    this.#opLength = end - c.pos
    const op = operatorWord(c.src, c.pos, end)
    if (op !== undefined) return op
    const word = c.src.slice(c.pos, end)
    if (word === 'strict') {
      const save = c.pos
      c.pos = end
      c.skipSpace()
      const ok = c.peekWord() === 'wildcard'
      this.#opLength = c.pos + 8 - save
      c.pos = save
      if (!ok) fail('expected "wildcard" after "strict"', end)
      return 'strict_wildcard'
    }
    if (word === 'and' || word === 'or' || word === 'xor') return undefined
    lowercaseHint(word, c.pos)
    // A dotted word is a field name: most likely a missing operator or comma before it.
    if (word.indexOf('.') !== -1) return fail(`expected an operator (eq, contains, in, …), found "${word}"`, c.pos)
    return fail(`unknown operator "${word}"`, c.pos)
  }

  #enter (pos: number): void {
    if (++this.#depth > MAX_DEPTH) fail(`expression nests deeper than ${MAX_DEPTH} levels`, pos)
  }
}
