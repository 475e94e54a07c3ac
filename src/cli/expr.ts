/**
 * `threatfeed expr check`: checks a WAF or smart-firewall rule expression the way ingestion
 * does, so a rule can be fixed before it is sent. Exit 0 when valid, 1 when invalid, 2 on a
 * usage error.
 */
import { checkExpression, printExpression, type Phase, type RuleKind } from '../expr/check.js'
import { CliError, parseOptions, readAll, writeHelp, writeJson, type CliIo, type Command } from './command.js'

const KINDS: readonly RuleKind[] = ['waf_rule', 'smart_firewall_rule']
const PHASES: readonly Phase[] = ['request', 'response']
/** Longest stretch of a line shown above the caret; rules can be 4096 characters on one line. */
const WINDOW = 100

const help = `Usage: threatfeed expr check --kind waf_rule|smart_firewall_rule [--phase request|response] [--json] [EXPR]

Checks a rule expression (Cloudflare Rules language / wirefilter syntax) against the field
scheme of its kind, exactly as POST /v2/signal does. Reads the expression from stdin when
EXPR is absent.

Options:
  --kind KIND     waf_rule or smart_firewall_rule (required)
  --phase PHASE   request or response (WAF rules only; detected when absent)
  --json          print one JSON document: {"ok":true,"kind","fields","phase","expression"}
                  or {"ok":false,"kind","error":{"message","offset","line","column"}}

Exit status: 0 valid, 1 invalid, 2 usage error.

Example:
  threatfeed expr check --kind waf_rule 'http.request.uri.path contains "/admin" and not ssl'`

export const exprCommand: Command = {
  name: 'expr',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const [sub, ...rest] = args
    if (sub === '--help' || sub === '-h') return writeHelp(io, help)
    if (sub !== 'check') throw new CliError(sub === undefined ? 'expr needs a subcommand: check' : `unknown expr subcommand ${JSON.stringify(sub)}; expected check`)
    const { values, positionals } = parseOptions(rest, { kind: { type: 'string' }, phase: { type: 'string' } }, true)
    if (values.help === true) return writeHelp(io, help)
    const kind = values.kind
    if (kind === undefined) throw new CliError('--kind is required (waf_rule or smart_firewall_rule)')
    if (!(KINDS as readonly string[]).includes(kind)) throw new CliError(`--kind must be waf_rule or smart_firewall_rule, not ${JSON.stringify(kind)}`)
    const phase = values.phase
    if (phase !== undefined && !(PHASES as readonly string[]).includes(phase)) throw new CliError(`--phase must be request or response, not ${JSON.stringify(phase)}`)
    if (positionals.length > 1) throw new CliError(`expected one expression, got ${positionals.length} arguments (quote the expression)`)
    const text = positionals.length === 1 ? positionals[0]! : stripFinalNewline((await readAll(io.stdin)).toString('utf8'))

    const result = checkExpression(kind as RuleKind, text, phase as Phase | undefined)
    if (values.json === true) {
      writeJson(io, result.ok
        ? { ok: true, kind, fields: result.fields, phase: result.phase, expression: printExpression(result.ast) }
        : { ok: false, kind, error: result.error })
      return result.ok ? 0 : 1
    }
    if (result.ok) {
      const fields = result.fields.length === 0 ? '(none)' : result.fields.join(', ')
      const shownPhase = result.phase ?? 'none (smart firewall rules have no phase)'
      io.stdout.write(`ok\nfields: ${fields}\nphase: ${shownPhase}\n`)
      return 0
    }
    io.stdout.write(`error: ${result.error.message}\n${caret(text, result.error.line, result.error.column)}`)
    return 1
  },
}

/** A file piped in ends with a newline that is not part of the rule. */
function stripFinalNewline (s: string): string {
  return s.endsWith('\r\n') ? s.slice(0, -2) : s.endsWith('\n') ? s.slice(0, -1) : s
}

/**
 * The error's line, indented, with a caret under the column (tabs copied so the caret lines
 * up); a long line is cut to a window around the column.
 */
function caret (text: string, line: number, column: number): string {
  const chars = [...(text.split('\n')[line - 1] ?? '').replace(/\r$/, '')]
  let start = 0
  let prefix = ''
  let suffix = ''
  if (chars.length > WINDOW) {
    start = Math.max(0, Math.min(column - 1 - WINDOW / 2, chars.length - WINDOW))
    if (start > 0) prefix = '…'
    if (start + WINDOW < chars.length) suffix = '…'
  }
  const shown = chars.slice(start, start + WINDOW)
  const pad = shown.slice(0, column - 1 - start).map((c) => (c === '\t' ? '\t' : ' ')).join('')
  return `  ${prefix}${shown.join('')}${suffix}\n  ${prefix === '' ? '' : ' '}${pad}^\n`
}
