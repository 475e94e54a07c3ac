/**
 * docs/expressions.md: its `console` blocks run as written (each `$ ` line through bash, with
 * `threatfeed` the built command) and print what the page shows; its field tables are the schemes'.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { wafScheme } from '../../src/expr/schemes/waf.js'
import { smartFirewallScheme } from '../../src/expr/schemes/smart-firewall.js'
import { functions } from '../../src/expr/functions.js'
import { runConsoleBlocks } from './console.js'

const page = readFileSync(new URL('../../docs/expressions.md', import.meta.url), 'utf8')

t.test('every console command prints what the page shows', async (t) => {
  const ran = runConsoleBlocks(page)
  t.ok(ran.length > 0, 'the page has console blocks')
  for (const r of ran) t.equal(r.printed, r.shown, r.command)
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
