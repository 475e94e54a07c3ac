/**
 * The entry point ingestion calls: parse and type-check a rule expression against the field
 * scheme of its kind (SPEC §2.4), in bounded time whatever the input.
 *
 * Bounds: at most 4096 characters (Cloudflare's rule-expression limit), nesting capped in the
 * parser, sets capped at 1024 values, regexes capped by estimated compiled size and wildcards
 * by star count. Every step is linear in the text, so the 4096-character cap bounds the work.
 */
import type { Expr } from './ast.js'
import { ExpressionError, toDiagnostic, type ExpressionDiagnostic } from './diagnostic.js'
import { parseAndCheck, parseExpression } from './parser.js'
import { smartFirewallScheme } from './schemes/smart-firewall.js'
import { wafScheme } from './schemes/waf.js'
import { MAX_TEXT_LENGTH } from './text.js'
import { fieldNames, type CheckContext } from './typing.js'
import { fieldsById } from './words.js'
import type { Phase, RuleKind, Scheme } from './types.js'

export { printExpression } from './printer.js'
export type { Expr } from './ast.js'
export type { ExpressionDiagnostic } from './diagnostic.js'
export type { Phase, RuleKind } from './types.js'

/** Cloudflare: "The maximum length of a rule expression is 4,096 characters." */
export const MAX_EXPRESSION_LENGTH = MAX_TEXT_LENGTH

export type CheckResult =
  | {
    readonly ok: true
    readonly ast: Expr
    /** Canonical names of the fields the expression reads, sorted, without duplicates. */
    readonly fields: string[]
    /** The phase the rule runs in: as given, else detected; null for smart firewall rules. */
    readonly phase: Phase | null
  }
  | { readonly ok: false, readonly error: ExpressionDiagnostic }

/**
 * What a rule kind is checked against: its scheme, the other one (for hints), its fields by word
 * id, and the set of fields used (CheckContext.fields), sized for the scheme. One set per kind,
 * zeroed by each check, not one per check: checks run one at a time (the lexer's bytes are
 * shared too, see text.ts), and the names are read out of it before the check returns.
 */
interface KindTables { readonly scheme: Scheme, readonly other: Scheme, readonly fieldOf: CheckContext['fieldOf'], readonly used: Int32Array }
const WAF = kindTables(wafScheme, smartFirewallScheme)
const SMART_FIREWALL = kindTables(smartFirewallScheme, wafScheme)

function kindTables (scheme: Scheme, other: Scheme): KindTables {
  return { scheme, other, fieldOf: fieldsById(scheme), used: new Int32Array((scheme.names.length + 31) >>> 5) }
}

/**
 * Checks a WAF or smart-firewall rule expression. Never throws for any string input.
 *
 * When `phase` is omitted for a WAF rule, the result names the phase the expression needs:
 * `response` if it reads any response field, else `request`. Smart firewall rules have no
 * phase (they act before a connection exists); passing one is an error.
 *
 * @example
 *   checkExpression('waf_rule', 'http.request.uri.path contains "/admin" and not ssl')
 *   // → { ok: true, ast, fields: ['http.request.uri.path', 'ssl'], phase: 'request' }
 *   checkExpression('waf_rule', 'ip.src contains "10."')
 *   // → { ok: false, error: { message: '"contains" needs Bytes, ip.src is Ip at 1:8', offset: 7, line: 1, column: 8 } }
 */
export function checkExpression (kind: RuleKind, text: string, phase?: Phase): CheckResult {
  if (typeof text !== 'string') {
    return { ok: false, error: { message: 'the expression must be a string at 1:1', offset: 0, line: 1, column: 1 } }
  }
  // Compares, not a keyed lookup: `kind` comes from ingestion and may be any string.
  const tables = kind === 'waf_rule' ? WAF : kind === 'smart_firewall_rule' ? SMART_FIREWALL : undefined
  if (tables === undefined) return refuse(text, new ExpressionError(`unknown rule kind ${JSON.stringify(kind)}`, 0))
  const refused = refuseArguments(tables.scheme, phase, text)
  if (refused !== undefined) return refuse(text, refused)
  const used = tables.used
  for (let k = 0; k < used.length; k++) used[k] = 0
  const ctx: CheckContext = {
    src: text,
    scheme: tables.scheme,
    other: tables.other,
    phase,
    fieldOf: tables.fieldOf,
    fields: used,
    usesResponseField: false,
  }
  try {
    const ast = parseAndCheck(ctx)
    const detected: Phase | null = ctx.scheme.hasPhase ? phase ?? (ctx.usesResponseField ? 'response' : 'request') : null
    return { ok: true, ast, fields: fieldNames(ctx.scheme, ctx.fields), phase: detected }
  } catch (e) {
    return refuse(text, syntaxErrorOr(text, e))
  }
}

function refuse (text: string, e: ExpressionError): CheckResult {
  return { ok: false, error: toDiagnostic(text, e) }
}

/** Why the phase or the length rules the expression out before it is read; undefined if they do not. */
function refuseArguments (scheme: Scheme, phase: Phase | undefined, text: string): ExpressionError | undefined {
  if (phase !== undefined && !scheme.hasPhase) {
    return new ExpressionError('smart firewall rules take no phase (layer 3/4 rules act before a connection exists)', 0)
  }
  if (phase !== undefined && phase !== 'request' && phase !== 'response') {
    return new ExpressionError(`unknown phase ${JSON.stringify(phase)}; use "request" or "response"`, 0)
  }
  if (text.length > MAX_EXPRESSION_LENGTH) {
    return new ExpressionError(`expression is ${text.length} characters long; the limit is ${MAX_EXPRESSION_LENGTH}`, MAX_EXPRESSION_LENGTH)
  }
  return undefined
}

/**
 * The error to report when the one-pass check failed with `e`. Types are checked as nodes are
 * built, so a type error can be found before a syntax error further on; the syntax error must
 * win (the rule is not an expression at all), as it does when the whole text is parsed before
 * it is typed. So the text is parsed again for its syntax only: a second parse on rejected
 * input only, never on the common path.
 */
function syntaxErrorOr (text: string, e: unknown): ExpressionError {
  try {
    parseExpression(text)
  } catch (syntax) {
    if (syntax instanceof ExpressionError) return syntax
    e = syntax
  }
  if (e instanceof ExpressionError) return e
  // A bug of ours must not take ingestion down with it; report it against the expression.
  return new ExpressionError(`internal error while checking the expression: ${(e as Error)?.message ?? String(e)}`, 0)
}
