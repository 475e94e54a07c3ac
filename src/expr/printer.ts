/**
 * Canonical text of an expression: English lowercase operators, single spaces, decimal
 * integers, canonical IP text, strings re-escaped (raw strings stay raw, with as few `#` as
 * their content allows). Parsing the output gives back the same tree (modulo source offsets),
 * which the round-trip property test pins. Also used for operands and values in messages.
 */
import { compareOpText, type Arg, type Expr, type IndexKey, type Literal, type LogicalOp, type Operand, type SetLit, type StringLit } from './ast.js'
import { bytesToText } from './lexer.js'

const PRECEDENCE: Readonly<Record<LogicalOp, number>> = { or: 0, xor: 1, and: 2 }

/**
 * Prints an expression tree as canonical text.
 *
 * @example
 *   const r = checkExpression('waf_rule', 'http.host == "a" && !ssl')
 *   if (r.ok) printExpression(r.ast) // 'http.host eq "a" and not ssl'
 */
export function printExpression (e: Expr): string {
  switch (e.kind) {
    case 'logical':
      // A parsed tree holds a looser-binding operator below a tighter one only inside a group;
      // a tree built by hand gets the parentheses it needs to keep its meaning.
      return e.items.map((item) => item.kind === 'logical' && PRECEDENCE[item.op] <= PRECEDENCE[e.op]
        ? `(${printExpression(item)})`
        : printExpression(item)).join(` ${e.op} `)
    case 'not':
      return e.arg.kind === 'logical' ? `not (${printExpression(e.arg)})` : `not ${printExpression(e.arg)}`
    case 'group':
      return `(${printExpression(e.expr)})`
    case 'bare':
      return printOperand(e.operand)
    case 'compare':
      return `${printOperand(e.lhs)} ${compareOpText[e.op]} ${e.rhs.kind === 'set' ? printSet(e.rhs) : e.op === 'matches' && e.rhs.kind === 'string' ? printRegex(e.rhs) : printLiteral(e.rhs)}`
  }
}

export function printOperand (o: Operand): string {
  switch (o.kind) {
    case 'field':
      return o.name
    case 'call':
      return `${o.name}(${o.args.map(printArg).join(', ')})`
    case 'index':
      return `${printOperand(o.target)}[${printKey(o.key)}]`
  }
}

function printKey (k: IndexKey): string {
  return k.kind === 'each' ? '*' : printLiteral(k)
}

function printArg (a: Arg): string {
  return a.kind === 'string' || a.kind === 'int' ? printLiteral(a) : printExpression(a)
}

function printSet (s: SetLit): string {
  return `{${s.items.map(printLiteral).join(' ')}}`
}

export function printLiteral (l: Literal): string {
  switch (l.kind) {
    case 'string': return printString(l)
    case 'int': return String(l.value)
    case 'int_range': return `${l.from}..${l.to}`
    case 'ip': return l.address
    case 'cidr': return `${l.address}/${l.prefix}`
    case 'ip_range': return `${l.from}..${l.to}`
  }
}

function printString (s: StringLit): string {
  if (s.raw) {
    // A raw string's bytes came from source text, so they decode; hashes: one more than the
    // longest run of # that follows a quote inside, so the content cannot close it early.
    const text = bytesToText(s.value) ?? s.value
    let hashes = 0
    for (let i = text.indexOf('"'); i !== -1; i = text.indexOf('"', i + 1)) {
      let run = 0
      while (text.charCodeAt(i + 1 + run) === 35) run++
      if (run + 1 > hashes) hashes = run + 1
    }
    const h = '#'.repeat(hashes)
    return `r${h}"${text}"${h}`
  }
  return `"${escapeBytes(s.value)}"`
}

/**
 * The pattern after `matches`, quoted so that the lexer's regex rule (Cursor.readRegex) reads
 * it back as it is: escapes stay as written (`"a\x2ecom"` is not `"a.com"` to a regex), and
 * only a `"` outside a character class takes a backslash. What that rule cannot give back (a
 * `\"` outside a class, a backslash at the very end: hand-built trees only) prints raw.
 */
function printRegex (s: StringLit): string {
  const text = s.raw ? undefined : bytesToText(s.value)
  if (text === undefined) return printString(s)
  let out = '"'
  let inClass = false
  let chunk = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 92 /* \ */) {
      if (i + 1 === text.length || (text.charCodeAt(i + 1) === 34 && !inClass)) return printString({ ...s, raw: true })
      i++
    } else if (c === 34 /* " */ && !inClass) {
      out += text.slice(chunk, i) + '\\'
      chunk = i
    } else if (c === 91 /* [ */) {
      inClass = true
    } else if (c === 93 /* ] */) {
      inClass = false
    }
  }
  return out + text.slice(chunk) + '"'
}

/** Quoted-string body: printable ASCII and valid UTF-8 text as is, `"` `\` escaped, the rest \xHH. */
function escapeBytes (bytes: string): string {
  let out = ''
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes.charCodeAt(i)
    if (b === 34 || b === 92) { out += '\\' + bytes[i]; continue }
    if (b >= 0x20 && b < 0x7f) { out += bytes[i]; continue }
    const len = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0
    const text = len === 0 ? undefined : bytesToText(bytes.slice(i, i + len))
    const cp = text === undefined ? -1 : text.codePointAt(0)!
    // Keep visible characters; invisible ones (C1 controls, separators) become escapes.
    if (text !== undefined && text.length > 0 && !/[\p{C}\p{Z}]/u.test(text) && cp > 0x9f) {
      out += text
      i += len - 1
      continue
    }
    out += '\\x' + b.toString(16).padStart(2, '0')
  }
  return out
}
