/**
 * The syntax tree of a filter expression. Plain, JSON-serialisable objects (ingestion may store
 * or ship them across threads): integers are safe JS numbers, strings are byte strings.
 *
 * Every node carries `pos`, the UTF-16 offset in the source where it starts, so the checker
 * can point at the exact spot; nothing else about the source text (spelling of operators,
 * spacing, integer radix) is kept, which is what makes `printExpression` canonical.
 *
 * Byte strings: the language's strings are byte sequences (`"\xff"` is one byte, not valid
 * UTF-8), so `StringLit.value` holds one JS char per byte (latin1-style, codes 0–255). Text
 * typed in the expression is stored UTF-8 encoded; ASCII, the common case, is unchanged.
 */

export type LogicalOp = 'and' | 'or' | 'xor'

export type CompareOp =
  | 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge'
  | 'contains' | 'matches' | 'wildcard' | 'strict_wildcard'
  | 'bitwise_and' | 'in'

export interface StringLit {
  readonly kind: 'string'
  /** Byte string: one char per byte. */
  readonly value: string
  /** Written as a raw string `r"…"` / `r#"…"#` (kept so regexes print as they were typed). */
  readonly raw: boolean
  readonly pos: number
}

export interface IntLit { readonly kind: 'int', readonly value: number, readonly pos: number }

export interface IntRangeLit {
  readonly kind: 'int_range'
  readonly from: number
  readonly to: number
  readonly pos: number
}

/** An IP address; `address` is canonical text (dotted quad, or RFC 5952 for IPv6). */
export interface IpLit { readonly kind: 'ip', readonly address: string, readonly pos: number }

export interface CidrLit {
  readonly kind: 'cidr'
  readonly address: string
  readonly prefix: number
  readonly pos: number
}

export interface IpRangeLit {
  readonly kind: 'ip_range'
  readonly from: string
  readonly to: string
  readonly pos: number
}

export type Literal = StringLit | IntLit | IntRangeLit | IpLit | CidrLit | IpRangeLit

/**
 * Literal kinds as bits, so that a set of kinds is one number: the kinds a value or a set
 * holds, the kinds an operand accepts. The parser learns each value's kind as it reads it and
 * hands the kinds to the type check, which then never reads `kind` back from a literal: that
 * property is read from objects of six shapes, which V8 serves from its slower megamorphic
 * cache (measured, with the loop over a set's items it replaces: 2–3 % of a check).
 */
export const STRING_KIND = 1
export const INT_KIND = 2
export const INT_RANGE_KIND = 4
export const IP_KIND = 8
export const CIDR_KIND = 16
export const IP_RANGE_KIND = 32

export interface SetLit { readonly kind: 'set', readonly items: readonly Literal[], readonly pos: number }

export interface FieldRef { readonly kind: 'field', readonly name: string, readonly pos: number }

export interface Call {
  readonly kind: 'call'
  readonly name: string
  readonly args: readonly Arg[]
  readonly pos: number
}

/** `[*]` map-each, `[0]` array position, `["name"]` map key. */
export type IndexKey = { readonly kind: 'each' } | IntLit | StringLit

export interface Index {
  readonly kind: 'index'
  readonly target: Operand
  readonly key: IndexKey
  /** Offset of the `[`. */
  readonly pos: number
}

export type Operand = FieldRef | Call | Index

export interface Compare {
  readonly kind: 'compare'
  readonly lhs: Operand
  readonly op: CompareOp
  readonly rhs: Literal | SetLit
  readonly pos: number
  /** Offset of the operator. */
  readonly opPos: number
}

/**
 * An operand standing alone: a Bool field used as a condition (`ssl`, `tcp.flags.syn`), or,
 * as a function argument, the value passed (`lower(http.host)`).
 */
export interface Bare { readonly kind: 'bare', readonly operand: Operand, readonly pos: number }

export interface Not { readonly kind: 'not', readonly arg: Expr, readonly pos: number }

export interface Group { readonly kind: 'group', readonly expr: Expr, readonly pos: number }

/** `a and b and c` is one node with three items, as in wirefilter. */
export interface Logical {
  readonly kind: 'logical'
  readonly op: LogicalOp
  readonly items: readonly Expr[]
  readonly pos: number
}

export type Expr = Logical | Not | Group | Compare | Bare

/** A function argument: an expression, or a string or integer literal. */
export type Arg = Expr | StringLit | IntLit

/** Operator spelling used in canonical text and error messages. */
export const compareOpText: Readonly<Record<CompareOp, string>> = Object.freeze({
  eq: 'eq',
  ne: 'ne',
  lt: 'lt',
  le: 'le',
  gt: 'gt',
  ge: 'ge',
  contains: 'contains',
  matches: 'matches',
  wildcard: 'wildcard',
  strict_wildcard: 'strict wildcard',
  bitwise_and: 'bitwise_and',
  in: 'in',
})
