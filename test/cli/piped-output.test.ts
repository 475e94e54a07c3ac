/**
 * Every command that can print more than a pipe holds (64 KiB), run as the real command with its
 * stdout piped into a reader that sleeps before reading, delivers every byte; and a reader that
 * leaves early (`| head -c 100`) ends the command quietly with its usual exit code. The expected
 * bytes come from the same command run in-process, where nothing is cut.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { runCli } from '../../src/cli/main.js'
import type { Command } from '../../src/cli/command.js'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { GEO_FIXTURES, rule } from '../feed/fixtures.js'
import { NO_COVERAGE, THREATFEED_BIN, runCommand, runCommandBytes, runPiped } from '../helpers/cli.js'

const PIPE_BYTES = 64 * 1024
const dir = mkdtempSync(join(tmpdir(), 'tf-cli-piped-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { THREATFEED_DATA_DIR: dir, THREATFEED_GEO_COUNTRY_DB: `${GEO_FIXTURES}/GeoLite2-Country-Test.mmdb`, THREATFEED_GEO_ASN_DB: `${GEO_FIXTURES}/GeoLite2-ASN-Test.mmdb` }

// Random hosts: neither coalesced nor compressed away, so the feed is big even gzipped.
let seed = 7
const rand = (): number => { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; return seed }
const v4 = Array.from({ length: 1500 }, () => { const a = rand(); return `${(a >>> 24) % 223 + 1}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}/32` })
const v6 = Array.from({ length: 6000 }, () => `2001:db8:${Array.from({ length: 6 }, () => (rand() & 0xffff).toString(16)).join(':')}/128`)

const started = performance.now()
const store = await openEmbeddedStore(dir)
const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
const inputs = [...new Set([...v4, ...v6])].map((ip) => rule(ws.id, ip))
// In parallel: the store batches concurrent writes into few transactions.
for (let i = 0; i < inputs.length; i += 500) await Promise.all(inputs.slice(i, i + 500).map((r) => store.rules.upsertAccessRule(r)))
await Promise.all(Array.from({ length: 700 }, async (_, i) => {
  await store.workspaces.create({ name: `workspace ${i} ${'w'.repeat(180)}`, subscription: 'active' })
  await store.keys.create({ workspaceId: ws.id, hash: createHash('sha256').update(`k${i}`).digest('hex'), scopes: ['signals:write', 'feeds:read'] })
  await store.lists.create({ workspaceId: ws.id, name: `list ${i} ${'l'.repeat(180)}`, description: 'd'.repeat(190), defaults: {}, selector: { team: `t${i}` } })
}))
await store.stream.append(Array.from({ length: 1000 }, (_, i) => ({ workspaceId: ws.id, payload: `{"type":"access_rules","action":"block","ip":"${v4[i]!.slice(0, -3)}","note":"${'n'.repeat(60)}"}`, acceptedAt: Date.UTC(2026, 0, 1) + i })))
await store.close()
t.comment(`data written in ${Math.round(performance.now() - started)} ms`)

// A country of the fixture database would be small: an ASN database built by the CLI from a
// CSV of 6,000 separate ranges gives `geo expand` a large answer.
const asnCsv = join(dir, 'asn.csv')
writeFileSync(asnCsv, Array.from({ length: 6000 }, (_, i) => `10.${i >> 8}.${i & 255}.0,10.${i >> 8}.${i & 255}.${(i % 7) + 1},64500,"Example ${i % 3}"`).join('\n') + '\n')
const asnDb = join(dir, 'asn.mmdb')
const threatfeed: Command = { name: 'threatfeed', help: '', run: runCli }
t.equal((await runCommand(threatfeed, ['geo', 'build-asn', '--csv', asnCsv, '--out', asnDb], { env })).code, 0, 'ASN database built')

const coalesceInput = [...v4, ...v6].join('\n') + '\n'

/** A feed names the time it was generated: equal feeds differ there from one second to the next. */
const undated = (s: string): string => s.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
const feedJson = (b: Buffer): string => {
  const { etag, bodyBase64, body, ...rest } = JSON.parse(b.toString()) as Record<string, string>
  return undated(JSON.stringify({ ...rest, etag: /^"[a-z0-9_.]+"$/.test(etag!), body: body ?? gunzipSync(Buffer.from(bodyBase64!, 'base64')).toString() }))
}

/** `early`: also run into `| head -c 100` (one case per way a command writes is enough). */
interface Case { description: string, early?: true, args: string[], stdin?: string, env?: NodeJS.ProcessEnv, normalise?: (b: Buffer) => string }
const feed = ['feed', 'get', '--workspace', ws.id]
const cases: Case[] = [
  { description: 'rules ls', early: true, args: ['rules', 'ls', '--workspace', ws.id] },
  { description: 'rules ls --json', args: ['rules', 'ls', '--workspace', ws.id, '--json'] },
  { description: 'feed get plain', args: feed },
  { description: 'feed get dialect_a', args: [...feed, '--format', 'dialect_a'], normalise: (b) => undated(b.toString()) },
  { description: 'feed get dialect_b', args: [...feed, '--format', 'dialect_b'], normalise: (b) => undated(b.toString()) },
  { description: 'feed get nftables', early: true, args: [...feed, '--format', 'nftables', '--family', 'v6'] },
  { description: 'feed get --json', args: [...feed, '--format', 'dialect_a', '--json'], normalise: feedJson },
  { description: 'feed get --gzip', early: true, args: [...feed, '--format', 'dialect_a', '--gzip'], normalise: (b) => undated(gunzipSync(b).toString()) },
  { description: 'feed get --gzip --json', args: [...feed, '--gzip', '--json'], normalise: feedJson },
  { description: 'stream tail', early: true, args: ['stream', 'tail', '--limit', '1000'] },
  { description: 'stream tail --json', args: ['stream', 'tail', '--limit', '1000', '--json'] },
  { description: 'list ls', args: ['list', 'ls', '--workspace', ws.id] },
  { description: 'list ls --json', args: ['list', 'ls', '--workspace', ws.id, '--json'] },
  { description: 'key ls', args: ['key', 'ls'] },
  { description: 'key ls --json', args: ['key', 'ls', '--json'] },
  { description: 'workspace ls', args: ['workspace', 'ls'] },
  { description: 'workspace ls --json', args: ['workspace', 'ls', '--json'] },
  { description: 'geo expand', args: ['geo', 'expand', '--asn', 'AS64500'], env: { ...env, THREATFEED_GEO_ASN_DB: asnDb } },
  { description: 'coalesce --json', args: ['coalesce', '--json'], stdin: coalesceInput },
  { description: 'coalesce', early: true, args: ['coalesce'], stdin: coalesceInput },
]

for (const c of cases) {
  t.test(`${c.description}: every byte through a slow pipe${c.early === true ? '; quiet when the reader leaves' : ''}`, async (t) => {
    const expected = await runCommandBytes(threatfeed, c.args, { env: c.env ?? env, stdin: c.stdin })
    t.equal(expected.code, 0, `in-process: ${expected.stderr}`)
    const expectedBytes = expected.stdout
    t.ok(expectedBytes.length > PIPE_BYTES, `more than a pipe holds (${expectedBytes.length} bytes)`)

    const [slow, early] = await Promise.all([
      runPiped(c.args, 'sleep 0.3; cat', { env: c.env ?? env, stdin: c.stdin }),
      c.early === true ? runPiped(c.args, 'head -c 100 >/dev/null', { env: c.env ?? env, stdin: c.stdin }) : null,
    ])
    t.equal(slow.code, 0, 'exit status 0')
    t.equal(slow.stderr, '', 'nothing on stderr')
    if (c.normalise === undefined) {
      t.equal(slow.stdout.length, expectedBytes.length, 'every byte')
      t.ok(slow.stdout.equals(expectedBytes), 'the same bytes as in-process')
    } else {
      t.ok(slow.stdout.length > PIPE_BYTES, `more than a pipe holds arrived (${slow.stdout.length} bytes)`)
      t.equal(c.normalise(slow.stdout), c.normalise(expectedBytes), 'the same output as in-process')
    }
    if (early !== null) {
      t.equal(early.code, 0, 'usual exit status when the reader leaves early')
      t.equal(early.stderr, '', 'quietly: nothing on stderr')
    }
  })
}

t.test('a write error other than a closed pipe fails the command and says why', async (t) => {
  const r = spawnSync('bash', ['--norc', '--noprofile', '-c', '"$@" >/dev/full', 'bash', process.execPath, THREATFEED_BIN, 'workspace', 'ls', '--json'], { env: { PATH: process.env.PATH, ...NO_COVERAGE, ...env }, encoding: 'utf8' })
  t.equal(r.status, 1)
  t.equal(r.stderr, 'threatfeed: cannot write to stdout: ENOSPC: no space left on device, write\n')
})
