/**
 * The admin commands through their public surface (in-process, real LMDB store): workspace, key
 * and list, including the bad input an operator types.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../../src/cli/main.js'
import { runCommand } from '../helpers/cli.js'
import type { Command } from '../../src/cli/command.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { THREATFEED_DATA_DIR: dir }

/** The dispatcher as a Command, so every test goes through `threatfeed <args>`. */
const threatfeed: Command = { name: 'threatfeed', help: '', run: runCli }
const run = (...args: string[]) => runCommand(threatfeed, args, { env })

t.test('workspace, key and list round trip', async (t) => {
  const w = await run('workspace', 'create', '--name', 'acme', '--json')
  t.equal(w.code, 0, w.stderr)
  const ws = JSON.parse(w.stdout) as { id: string, name: string }
  t.same(Object.keys(ws), ['id', 'name'])
  t.equal(ws.name, 'acme')
  t.match(ws.id, /^[0-9a-f-]{36}$/)

  const k = await run('key', 'create', '--workspace', ws.id, '--scopes', 'signals:write,feeds:read', '--json')
  t.equal(k.code, 0, k.stderr)
  const key = JSON.parse(k.stdout) as { id: string, key: string }
  t.same(Object.keys(key), ['id', 'key'])
  t.match(key.key, /^tf_/)

  const ls = await run('key', 'ls', '--workspace', ws.id, '--json')
  t.notMatch(ls.stdout, key.key, 'key ls never shows the key')
  t.same((JSON.parse(ls.stdout) as Array<{ id: string }>).map((x) => x.id), [key.id])

  const l = await run('list', 'create', '--workspace', ws.id, '--name', 'edge', '--description', 'edge routers', '--format', 'dialect_a', '--family', 'v4', '--max-entries', '500000', '--confidence', 'medium', '--select', 'team=red', '--select', 'tier=1', '--json')
  t.equal(l.code, 0, l.stderr)
  const list = JSON.parse(l.stdout) as { id: string, name: string }
  t.same(Object.keys(list), ['id', 'name'])

  const shown = JSON.parse((await run('list', 'show', '--id', list.id, '--json')).stdout) as Record<string, unknown>
  t.same(shown.defaults, { format: 'dialect_a', family: 'v4', max_entries: 500000, confidence: 'medium' })
  t.same(shown.selector, { team: 'red', tier: '1' })
  t.equal(shown.description, 'edge routers')

  const up = await run('list', 'update', '--id', list.id, '--severity', 'critical', '--json')
  t.equal(up.code, 0, up.stderr)
  t.same((JSON.parse(up.stdout) as { defaults: unknown }).defaults, { format: 'dialect_a', family: 'v4', max_entries: 500000, confidence: 'medium', severity: 'critical' })

  const lists = JSON.parse((await run('list', 'ls', '--workspace', ws.id, '--json')).stdout) as unknown[]
  t.equal(lists.length, 1)

  t.equal((await run('workspace', 'update', '--workspace', ws.id, '--subscription', 'inactive')).code, 0)
  const wls = JSON.parse((await run('workspace', 'ls', '--json')).stdout) as Array<{ id: string, subscription: string }>
  t.equal(wls.find((x) => x.id === ws.id)?.subscription, 'inactive')

  const revoked = await run('key', 'revoke', '--id', key.id)
  t.same(revoked, { code: 0, stdout: `revoked key ${key.id}\n`, stderr: '' })
  const after = JSON.parse((await run('key', 'ls', '--json')).stdout) as Array<{ id: string, revoked: boolean }>
  t.equal(after.find((x) => x.id === key.id)?.revoked, true)

  t.equal((await run('list', 'delete', '--id', list.id)).code, 0)
  t.equal((await run('list', 'show', '--id', list.id)).code, 1)
  t.equal((await run('workspace', 'delete', '--workspace', ws.id)).code, 0)
  t.equal((JSON.parse((await run('workspace', 'ls', '--json')).stdout) as unknown[]).length, 0)
})

t.test('bad input: clear errors on stderr, non-zero exit, nothing on stdout', async (t) => {
  const w = JSON.parse((await run('workspace', 'create', '--name', 'beta', '--json')).stdout) as { id: string }
  const missing = '00000000-0000-4000-8000-000000000000'
  const cases: Array<{ description: string, args: string[], code: number, stderr: RegExp }> = [
    { description: 'unknown command', args: ['frobnicate'], code: 2, stderr: /unknown command "frobnicate"/ },
    { description: 'unknown verb', args: ['workspace', 'explode'], code: 2, stderr: /unknown workspace command "explode"/ },
    { description: 'unknown option', args: ['workspace', 'create', '--name', 'x', '--colour', 'red'], code: 2, stderr: /Unknown option '--colour'/ },
    { description: 'workspace without name', args: ['workspace', 'create'], code: 2, stderr: /--name is required/ },
    { description: 'bad subscription', args: ['workspace', 'create', '--name', 'x', '--subscription', 'trial'], code: 2, stderr: /--subscription must be one of active, inactive, got "trial"/ },
    { description: 'control character in a name', args: ['workspace', 'create', '--name', 'a\nb'], code: 2, stderr: /--name must not contain control characters/ },
    { description: 'update unknown workspace', args: ['workspace', 'update', '--workspace', missing, '--subscription', 'active'], code: 1, stderr: /no workspace with id 00000000/ },
    { description: 'update with nothing to change', args: ['workspace', 'update', '--workspace', w.id], code: 2, stderr: /nothing to update/ },
    { description: 'key for unknown workspace', args: ['key', 'create', '--workspace', missing, '--scopes', 'feeds:read'], code: 1, stderr: /no workspace with id/ },
    { description: 'bad scope', args: ['key', 'create', '--workspace', w.id, '--scopes', 'feeds:read,root'], code: 2, stderr: /unknown scope "root"; scopes are signals:write, feeds:read, rules:read, admin, admin:all/ },
    { description: 'empty scopes', args: ['key', 'create', '--workspace', w.id, '--scopes', ','], code: 2, stderr: /--scopes needs at least one/ },
    { description: 'revoke unknown key', args: ['key', 'revoke', '--id', missing], code: 1, stderr: /no API key with id/ },
    { description: 'list for unknown workspace', args: ['list', 'create', '--workspace', missing, '--name', 'x'], code: 1, stderr: /no workspace with id/ },
    { description: 'list bad format', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--format', 'xml'], code: 2, stderr: /--format must be one of plain, dialect_a, dialect_b, nftables, got "xml"/ },
    { description: 'list bad family', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--family', 'v5'], code: 2, stderr: /--family must be one of v4, v6, both/ },
    { description: 'list bad action', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--action', 'drop'], code: 2, stderr: /--action must be one of block, allow/ },
    { description: 'list zero max entries', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--max-entries', '0'], code: 2, stderr: /--max-entries must be a whole number from 1/ },
    { description: 'list non-numeric max entries', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--max-entries', '1e6'], code: 2, stderr: /--max-entries must be a whole number/ },
    { description: 'list bad confidence', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--confidence', 'certain'], code: 2, stderr: /--confidence must be one of low, medium, high/ },
    { description: 'list bad severity', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--severity', 'severe'], code: 2, stderr: /--severity must be one of low, medium, high, critical/ },
    { description: 'nftables with both families', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--format', 'nftables', '--family', 'both'], code: 2, stderr: /nftables needs --family v4 or v6/ },
    { description: 'selector without =', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--select', 'team'], code: 2, stderr: /--select takes key=value/ },
    { description: 'selector with $ key', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--select', '$where=1'], code: 2, stderr: /--select key "\$where" is not allowed/ },
    { description: 'selector with __proto__', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--select', '__proto__=1'], code: 2, stderr: /not allowed/ },
    { description: 'description with control character', args: ['list', 'create', '--workspace', w.id, '--name', 'x', '--description', 'a\rb'], code: 2, stderr: /--description must not contain control characters/ },
    { description: 'show unknown list', args: ['list', 'show', '--id', missing], code: 1, stderr: /no list with id/ },
    { description: 'list moved to another workspace', args: ['list', 'update', '--id', missing, '--workspace', w.id], code: 2, stderr: /cannot move/ },
  ]
  for (const c of cases) {
    const r = await run(...c.args)
    t.equal(r.code, c.code, `${c.description}: exit code`)
    t.match(r.stderr, c.stderr, `${c.description}: message`)
    t.equal(r.stdout, '', `${c.description}: nothing on stdout`)
  }
})

t.test('key revoke is idempotent: a revoked key stays revoked, exit 0, and says so', async (t) => {
  const w = JSON.parse((await run('workspace', 'create', '--name', 'gamma', '--json')).stdout) as { id: string }
  const key = JSON.parse((await run('key', 'create', '--workspace', w.id, '--scopes', 'feeds:read', '--json')).stdout) as { id: string }
  t.same(JSON.parse((await run('key', 'revoke', '--id', key.id, '--json')).stdout), { id: key.id, revoked: true, already_revoked: false })
  t.same(await run('key', 'revoke', '--id', key.id), { code: 0, stdout: `key ${key.id} was already revoked\n`, stderr: '' })
  const again = await run('key', 'revoke', '--id', key.id, '--json')
  t.equal(again.code, 0, again.stderr)
  t.same(JSON.parse(again.stdout), { id: key.id, revoked: true, already_revoked: true })
  t.same((JSON.parse((await run('key', 'ls', '--workspace', w.id, '--json')).stdout) as Array<{ revoked: boolean }>).map((k) => k.revoked), [true])
})

t.test('--help everywhere', async (t) => {
  for (const args of [['--help'], ['workspace', '--help'], ['key', '--help'], ['list', '--help'], ['serve', '--help'], ['list', 'create', '--help']]) {
    const r = await run(...args)
    t.equal(r.code, 0, args.join(' '))
    t.match(r.stdout, /Usage: threatfeed/, args.join(' '))
  }
})
