/**
 * Function signatures, after Cloudflare's functions reference
 * (developers.cloudflare.com/ruleset-engine/rules-language/functions). One entry per function;
 * each checks its arguments and returns its result type. Where Cloudflare says an argument
 * "must be a field" (it cannot be a literal) or "must be a literal", so do we: a rule that
 * passes here must also load in an engine that follows that reference.
 *
 * Map-each (`lower(http.request.headers.names[*])`) is handled by the caller: the first
 * argument's element type is checked here and the result becomes an array.
 */
import { fail } from './diagnostic.js'
import { ARRAY_BOOL, BOOL, BYTES, INT, IP, isArrayType, type Type } from './types.js'

export interface ArgInfo {
  /** The value's type; for a map-each operand (`x[*]`), the element type. */
  readonly type: Type
  readonly each: boolean
  /** Set when the argument is a literal. */
  readonly literal: 'string' | 'int' | undefined
  readonly value: string | number | undefined
  readonly pos: number
}

export interface FunctionDef {
  /** Checks the arguments (throwing ExpressionError) and returns the result type. */
  readonly check: (name: string, args: readonly ArgInfo[], callPos: number) => Type
}

function arity (name: string, args: readonly ArgInfo[], callPos: number, min: number, max: number): void {
  if (args.length >= min && args.length <= max) return
  const wanted = min === max ? `${min}` : max === Infinity ? `at least ${min}` : `${min} or ${max}`
  const plural = min === 1 && max === 1 ? 'argument' : 'arguments'
  fail(`${name}() takes ${wanted} ${plural}, got ${args.length}`, args.length > max ? args[max]!.pos : callPos)
}

function typed (name: string, args: readonly ArgInfo[], i: number, want: Type, hint = ''): ArgInfo {
  const a = args[i]!
  if (a.type !== want) fail(`argument ${i + 1} of ${name}() must be ${want}${hint}, got ${a.type}`, a.pos)
  return a
}

/** Cloudflare: "The source must be a field, that is, it cannot be a literal". */
function variable (name: string, a: ArgInfo, i: number): void {
  if (a.literal !== undefined) fail(`argument ${i + 1} of ${name}() must be a field or a function, not a literal`, a.pos)
}

function literalInt (name: string, args: readonly ArgInfo[], i: number, min: number, max: number): void {
  const a = typed(name, args, i, INT)
  if (a.literal !== 'int') fail(`argument ${i + 1} of ${name}() must be an integer literal`, a.pos)
  const v = a.value as number
  if (v < min || v > max) fail(`argument ${i + 1} of ${name}() must be between ${min} and ${max}, got ${v}`, a.pos)
}

function literalString (name: string, args: readonly ArgInfo[], i: number): string {
  const a = typed(name, args, i, BYTES)
  if (a.literal !== 'string') fail(`argument ${i + 1} of ${name}() must be a string literal`, a.pos)
  return a.value as string
}

/** f(source Bytes field) → Bytes. */
const bytesToBytes: FunctionDef = {
  check (name, args, callPos) {
    arity(name, args, callPos, 1, 1)
    variable(name, typed(name, args, 0, BYTES), 0)
    return BYTES
  },
}

const quantifier: FunctionDef = {
  check (name, args, callPos) {
    arity(name, args, callPos, 1, 1)
    typed(name, args, 0, ARRAY_BOOL, ' (a comparison using [*], as in http.request.headers.names[*] eq "x")')
    return BOOL
  },
}

const affix: FunctionDef = {
  check (name, args, callPos) {
    arity(name, args, callPos, 2, 2)
    variable(name, typed(name, args, 0, BYTES), 0)
    typed(name, args, 1, BYTES)
    return BOOL
  },
}

function jsonLookup (result: Type): FunctionDef {
  return {
    check (name, args, callPos) {
      arity(name, args, callPos, 2, Infinity)
      variable(name, typed(name, args, 0, BYTES), 0)
      for (let i = 1; i < args.length; i++) {
        const a = args[i]!
        if (a.literal === undefined) fail(`argument ${i + 1} of ${name}() must be a key: a string or a non-negative integer literal`, a.pos)
        if (a.literal === 'int' && (a.value as number) < 0) fail(`argument ${i + 1} of ${name}() is an array position and cannot be negative`, a.pos)
      }
      return result
    },
  }
}

export const functions: ReadonlyMap<string, FunctionDef> = new Map(Object.entries({
  any: quantifier,
  all: quantifier,
  lower: bytesToBytes,
  upper: bytesToBytes,
  decode_base64: bytesToBytes,
  starts_with: affix,
  ends_with: affix,
  lookup_json_string: jsonLookup(BYTES),
  lookup_json_integer: jsonLookup(INT),
  len: {
    check (name, args, callPos) {
      arity(name, args, callPos, 1, 1)
      const a = args[0]!
      variable(name, a, 0)
      if (a.type !== BYTES && !isArrayType(a.type)) fail(`argument 1 of len() must be Bytes or an array, got ${a.type}`, a.pos)
      return INT
    },
  },
  concat: {
    check (name, args, callPos) {
      arity(name, args, callPos, 1, Infinity)
      const first = args[0]!
      if (first.type !== BYTES && !isArrayType(first.type)) fail(`argument 1 of concat() must be Bytes or an array, got ${first.type}`, first.pos)
      for (let i = 1; i < args.length; i++) {
        const a = args[i]!
        if (a.type !== first.type) fail(`concat() joins values of one type: argument ${i + 1} is ${a.type}, argument 1 is ${first.type}`, a.pos)
      }
      return first.type
    },
  },
  url_decode: {
    check (name, args, callPos) {
      arity(name, args, callPos, 1, 2)
      variable(name, typed(name, args, 0, BYTES), 0)
      if (args.length === 2) {
        const options = literalString(name, args, 1)
        if (!/^(?!.*(.).*\1)[ru]*$/.test(options)) fail('url_decode() options are "r" (recursive) and "u" (Unicode %u), each at most once', args[1]!.pos)
      }
      return BYTES
    },
  },
  substring: {
    check (name, args, callPos) {
      arity(name, args, callPos, 2, 3)
      variable(name, typed(name, args, 0, BYTES), 0)
      typed(name, args, 1, INT)
      if (args.length === 3) typed(name, args, 2, INT)
      return BYTES
    },
  },
  remove_bytes: {
    check (name, args, callPos) {
      arity(name, args, callPos, 2, 2)
      variable(name, typed(name, args, 0, BYTES), 0)
      literalString(name, args, 1)
      return BYTES
    },
  },
  cidr: {
    check (name, args, callPos) {
      arity(name, args, callPos, 3, 3)
      variable(name, typed(name, args, 0, IP), 0)
      literalInt(name, args, 1, 1, 32)
      literalInt(name, args, 2, 1, 128)
      return IP
    },
  },
  cidr6: {
    check (name, args, callPos) {
      arity(name, args, callPos, 2, 2)
      variable(name, typed(name, args, 0, IP), 0)
      literalInt(name, args, 1, 1, 128)
      return IP
    },
  },
}))
