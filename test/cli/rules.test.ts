import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../../src/store/open.js'
import { rulesCommand } from '../../src/cli/rules.js'
import { runCommand } from '../helpers/cli.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-rules-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { THREATFEED_DATA_DIR: dir }

const store = await openStore({ kind: 'embedded', dataDir: dir })
const ws = await store.workspaces.create({ name: 'w', subscription: 'active' })
const now = Date.now()
const common = { workspaceId: ws.id, labels: {}, reason: null, seq: 1 }
await store.applyRuleBatch({
  ops: [
    { op: 'upsertAccessRule', input: { ...common, kind: 'access_rule', ruleRef: null, target: { type: 'ip', value: '192.0.2.1/32' }, action: 'block', name: 'n', confidence: null, severity: null, expiresAt: now + 60_000 } },
    { op: 'upsertAccessRule', input: { ...common, kind: 'access_rule', ruleRef: 'k', target: { type: 'asn', value: 'AS3' }, action: 'allow', name: null, confidence: 'low', severity: null, expiresAt: null } },
    { op: 'upsertAccessRule', input: { ...common, kind: 'access_rule', ruleRef: null, target: { type: 'country', value: 'DE' }, action: 'block', name: null, confidence: null, severity: null, expiresAt: now - 1000 } },
    { op: 'upsertExpressionRule', input: { ...common, kind: 'waf_rule', ruleRef: 'w1', name: 'w1', type: 'custom', expression: 'http.host eq "a"', action: 'block', order: null, shortDescription: null, config: { phase: 'request' }, expiresAt: null } },
  ],
})
await store.close()

t.test('ls --json lists live rules of every kind', async (t) => {
  const r = await runCommand(rulesCommand, ['ls', '--workspace', ws.id, '--json'], { env })
  t.equal(r.code, 0, r.stderr)
  const rules = JSON.parse(r.stdout) as Array<Record<string, unknown>>
  t.same(rules.map((x) => [x.kind, x.ruleRef]).sort(), [['access_rule', null], ['access_rule', 'k'], ['waf_rule', 'w1']])
  const host = rules.find((x) => x.name === 'n')!
  t.match(host, { workspace: ws.id, target: { type: 'ip', value: '192.0.2.1/32' }, action: 'block', expiresAt: new Date(now + 60_000).toISOString(), seq: 1 })
  t.notOk('workspaceId' in host)
  t.equal(r.stdout.trim().split('\n').length, 1, 'one JSON document')
})

t.test('--kind and --all', async (t) => {
  const waf = JSON.parse((await runCommand(rulesCommand, ['ls', '--workspace', ws.id, '--kind', 'waf_rule', '--json'], { env })).stdout) as unknown[]
  t.match(waf, [{ kind: 'waf_rule', config: { phase: 'request' }, expiresAt: null }])
  const all = JSON.parse((await runCommand(rulesCommand, ['ls', '--workspace', ws.id, '--kind', 'access_rule', '--all', '--json'], { env })).stdout) as unknown[]
  t.equal(all.length, 3, 'the lapsed rule too')
  const none = JSON.parse((await runCommand(rulesCommand, ['ls', '--workspace', ws.id, '--kind', 'smart_firewall_rule', '--json'], { env })).stdout) as unknown[]
  t.same(none, [])
})

t.test('text output: one line per rule', async (t) => {
  const r = await runCommand(rulesCommand, ['ls', '--workspace', ws.id], { env })
  const lines = r.stdout.trim().split('\n').sort()
  t.equal(lines.length, 3)
  t.match(r.stdout, /access_rule {2}ip=192\.0\.2\.1\/32 {2}block {2}expires=\d{4}-/)
  t.match(r.stdout, /access_rule {2}asn=AS3 ref=k {2}allow {2}expires=never/)
  t.match(r.stdout, /waf_rule {2}ref=w1 type=custom {2}block/)
})

t.test('usage errors', async (t) => {
  const cases: Array<{ args: string[], code: number, stderr: RegExp }> = [
    { args: ['ls'], code: 2, stderr: /--workspace is required/ },
    { args: ['ls', '--workspace', ws.id, '--kind', 'dns'], code: 2, stderr: /--kind must be one of access_rule, waf_rule, smart_firewall_rule, got "dns"/ },
    { args: ['ls', '--workspace', 'nope'], code: 1, stderr: /no workspace with id nope/ },
    { args: ['rm'], code: 2, stderr: /unknown rules command "rm"/ },
    { args: ['ls', '--bogus'], code: 2, stderr: /Unknown option '--bogus'/ },
  ]
  for (const c of cases) {
    const r = await runCommand(rulesCommand, c.args, { env })
    t.equal(r.code, c.code, c.args.join(' '))
    t.match(r.stderr, c.stderr)
  }
  const help = await runCommand(rulesCommand, ['--help'], { env })
  t.equal(help.code, 0)
  t.match(help.stdout, /Usage: threatfeed rules ls --workspace ID/)
})
