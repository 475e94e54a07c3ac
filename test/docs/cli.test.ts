/**
 * One source of truth for the command line: every command, verb and option docs/cli.md's command block
 * shows is in that command's --help with the same brackets (optional or required), and every
 * command and verb of --help is in docs/cli.md. Plus `--version`.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { runCli } from '../../src/cli/main.js'
import type { Command } from '../../src/cli/command.js'
import { runCommand } from '../helpers/cli.js'

const threatfeed: Command = { name: 'threatfeed', help: '', run: runCli }
const help = async (...args: string[]): Promise<string> => {
  const r = await runCommand(threatfeed, [...args, '--help'])
  t.equal(r.code, 0, `${args.join(' ')} --help`)
  return r.stdout
}
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }

/** The first `sh` block of docs/cli.md, one entry per command line. */
function pageSynopses (): string[] {
  const page = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8')
  const block = /```sh\n([\s\S]*?)```/.exec(page)![1]!
  const out: string[] = []
  for (const raw of block.split('\n')) {
    const line = raw.replace(/\s+#.*$/, '')
    if (line.startsWith('threatfeed ')) out.push(line.slice('threatfeed '.length))
    else if (/^\s+\S/.test(line)) out[out.length - 1] += ' ' + line.trim()
  }
  return out
}

/** Options in a synopsis, each with whether it sits inside [...] (optional). `--help` is everywhere. */
function optionsOf (synopsis: string): Map<string, 'optional' | 'required'> {
  const out = new Map<string, 'optional' | 'required'>()
  let depth = 0
  for (const m of synopsis.matchAll(/\[|\]|--[a-z][a-z0-9-]*/g)) {
    if (m[0] === '[') depth++
    else if (m[0] === ']') depth--
    else if (!out.has(m[0])) out.set(m[0], depth > 0 ? 'optional' : 'required')
  }
  return out
}

/**
 * The synopsis of each verb in a command's help: `Usage: threatfeed G <a|b>` lists verbs on lines
 * of their own (`  a --x [--y]`, continued on lines starting with `[`); otherwise the Usage line
 * itself (with its continuation) is the synopsis, of the verb it names if any.
 */
function helpSynopses (group: string, text: string): Map<string, string> {
  const lines = text.split('\n')
  const out = new Map<string, string>()
  const continued = (from: number): string => {
    let s = ''
    for (let i = from; i < lines.length && /^\s+\[/.test(lines[i]!); i++) s += ' ' + lines[i]!.trim()
    return s
  }
  const usage = lines.findIndex((l) => l.startsWith(`Usage: threatfeed ${group}`))
  const rest = lines[usage]!.slice(`Usage: threatfeed ${group}`.length).trim()
  const verbs = /^<([a-z|-]+)>/.exec(rest)
  if (verbs === null) {
    const verb = /^[a-z][a-z-]*(?=\s|$)/.exec(rest)?.[0]
    out.set(verb ?? '', rest.slice(verb?.length ?? 0) + continued(usage + 1))
    return out
  }
  for (const verb of verbs[1]!.split('|')) {
    const i = lines.findIndex((l) => l.startsWith(`  ${verb} `) || l === `  ${verb}`)
    t.ok(i >= 0, `${group} --help shows the synopsis of ${verb}`)
    if (i >= 0) out.set(verb, lines[i]!.slice(verb.length + 2).replace(/\s{2,}.*$/, '') + continued(i + 1))
  }
  return out
}

const commandsOfHelp = async (): Promise<string[]> => {
  const top = await help()
  return [...top.slice(top.indexOf('Commands:')).matchAll(/^ {2}([a-z-]+) /gm)].map((m) => m[1]!)
}

t.test('--version and -v print the version of package.json', async (t) => {
  for (const flag of ['--version', '-v']) {
    t.same(await runCommand(threatfeed, [flag]), { code: 0, stdout: `threatfeed ${pkg.version}\n`, stderr: '' }, flag)
  }
  t.match(await help(), /--version/)
})

t.test('every command, verb and option of docs/cli.md is in --help, with the same brackets', async (t) => {
  const synopses = pageSynopses()
  t.ok(synopses.length > 20, `docs/cli.md's command block was found (${synopses.length} lines)`)
  const helps = new Map<string, Map<string, string>>()
  for (const s of synopses) {
    const [group, maybeVerb] = s.split(' ')
    if (group!.startsWith('-')) {
      t.match(await help(), new RegExp(`threatfeed ${group}`), `${group} is in the top --help`)
      continue
    }
    if (!helps.has(group!)) helps.set(group!, helpSynopses(group!, await help(group!)))
    const verbs = helps.get(group!)!
    const verb = maybeVerb !== undefined && verbs.has(maybeVerb) ? maybeVerb : ''
    t.ok(verbs.has(verb), `docs/cli.md "threatfeed ${s.slice(0, 40)}…": ${group} --help has ${verb === '' ? 'its synopsis' : `the verb ${verb}`}`)
    const inHelp = optionsOf(verbs.get(verb) ?? '')
    const inPage = optionsOf(s)
    t.same(inPage, inHelp, `threatfeed ${group} ${verb}: docs/cli.md shows the options of --help, with the same brackets`)
  }
})

t.test('every command and verb of --help is in docs/cli.md', async (t) => {
  const shown = new Set(pageSynopses().map((s) => s.split(' ').slice(0, 2).join(' ')))
  const groups = new Set(pageSynopses().map((s) => s.split(' ')[0]))
  for (const group of await commandsOfHelp()) {
    t.ok(groups.has(group), `${group} is in docs/cli.md`)
    for (const verb of helpSynopses(group, await help(group)).keys()) {
      if (verb !== '') t.ok(shown.has(`${group} ${verb}`), `${group} ${verb} is in docs/cli.md`)
    }
  }
})
