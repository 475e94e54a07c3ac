/**
 * docs/expressions.md: its `console` blocks run as written (each `$ ` line through bash, with
 * `threatfeed` the built command) and print what the page shows; its field tables are the schemes'.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readFileSync } from 'node:fs'
import { wafScheme } from '../../src/expr/schemes/waf.js'
import { smartFirewallScheme } from '../../src/expr/schemes/smart-firewall.js'
import { functions } from '../../src/expr/functions.js'
import { NO_COVERAGE, THREATFEED_BIN } from '../helpers/cli.js'

const page = readFileSync(new URL('../../docs/expressions.md', import.meta.url), 'utf8')

t.test('every console command prints what the page shows', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-doc-expr-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'threatfeed'), `#!/bin/sh\nexec "${process.execPath}" "${THREATFEED_BIN}" "$@"\n`)
  chmodSync(join(dir, 'threatfeed'), 0o755)
  const blocks = [...page.matchAll(/```console\n([\s\S]*?)```/g)].map((m) => m[1]!)
  t.ok(blocks.length > 0, 'the page has console blocks')
  for (const block of blocks) {
    for (const part of block.split(/^\$ /m).slice(1)) {
      const command = part.slice(0, part.indexOf('\n'))
      const shown = part.slice(part.indexOf('\n') + 1)
      const r = spawnSync('bash', ['--norc', '-c', `${command} 2>&1`], { env: { PATH: `${dir}:${process.env.PATH ?? ''}`, ...NO_COVERAGE }, encoding: 'utf8' })
      t.equal(r.stdout, shown, command)
    }
  }
})

t.test('the field tables are the schemes, with their types', async (t) => {
  for (const [title, scheme] of [['WAF fields', wafScheme], ['Smart-firewall fields', smartFirewallScheme]] as const) {
    const section = page.slice(page.indexOf(`## ${title}`))
    const table = section.slice(0, section.indexOf('\n\n', section.indexOf('|---')))
    const rows = [...table.matchAll(/^\| `([^`]+)` \| (\S+)( \(response phase\))? \|$/gm)].map((m) => `${m[1]!} ${m[2]!}${m[3] === undefined ? '' : ' response'}`)
    t.same(rows, scheme.names.map((n) => `${n} ${scheme.fields[n]!.type}${scheme.fields[n]!.phase === 'response' ? ' response' : ''}`), title)
  }
  for (const name of functions.keys()) t.match(page, `\`${name}\``, `the function ${name} is named`)
})
