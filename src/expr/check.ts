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
import { parseExpression } from './parser.js'
import { smartFirewallScheme } from './schemes/smart-firewall.js'
import { wafScheme } from './schemes/waf.js'
import { checkTree, fieldNames, type CheckContext } from './typing.js'
import type { Phase, RuleKind, Scheme } from './types.js'

export { printExpression } from './printer.js'
export type { Expr } from './ast.js'
export type { ExpressionDiagnostic } from './diagnostic.js'
export type { Phase, RuleKind } from './types.js'

/** Cloudflare: "The maximum length of a rule expression is 4,096 characters." */
export const MAX_EXPRESSION_LENGTH = 4096

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

const schemes: Readonly<Record<RuleKind, Scheme>> = {
  waf_rule: wafScheme,
  smart_firewall_rule: smartFirewallScheme,
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
  const scheme = Object.hasOwn(schemes, kind) ? schemes[kind] : undefined
  try {
    if (scheme === undefined) throw new ExpressionError(`unknown rule kind ${JSON.stringify(kind)}`, 0)
    if (phase !== undefined && !scheme.hasPhase) {
      throw new ExpressionError('smart firewall rules take no phase (layer 3/4 rules act before a connection exists)', 0)
    }
    if (phase !== undefined && phase !== 'request' && phase !== 'response') {
      throw new ExpressionError(`unknown phase ${JSON.stringify(phase)}; use "request" or "response"`, 0)
    }
    if (text.length > MAX_EXPRESSION_LENGTH) {
      throw new ExpressionError(`expression is ${text.length} characters long; the limit is ${MAX_EXPRESSION_LENGTH}`, MAX_EXPRESSION_LENGTH)
    }
    const ast = parseExpression(text)
    const ctx: CheckContext = {
      src: text,
      scheme,
      other: scheme === wafScheme ? smartFirewallScheme : wafScheme,
      phase,
      fields: [],
      usesResponseField: false,
      each: false,
    }
    checkTree(ast, ctx)
    const detected: Phase | null = scheme.hasPhase ? phase ?? (ctx.usesResponseField ? 'response' : 'request') : null
    return { ok: true, ast, fields: fieldNames(scheme, ctx.fields), phase: detected }
  } catch (e) {
    if (e instanceof ExpressionError) return { ok: false, error: toDiagnostic(text, e) }
    // A bug of ours must not take ingestion down with it; report it against the expression.
    return { ok: false, error: toDiagnostic(text, new ExpressionError(`internal error while checking the expression: ${(e as Error)?.message ?? String(e)}`, 0)) }
  }
}
