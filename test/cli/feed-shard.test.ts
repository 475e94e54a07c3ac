/**
 * `threatfeed feed get --shard I [--of N]` (issue 21, README "Shards"): the shards the server
 * answers for `?shard=I&of=N`, with the list's stored N as the default, and the server's 400 for
 * every bad combination (the same message and body, exit status 2).
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { feedCommand } from '../../src/cli/feed.js'
import { isThreatfeedError } from '../../src/errors.js'
import { parseFeedQuery, resolveVariant } from '../../src/http/feed-params.js'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { runCommand } from '../helpers/cli.js'
import { addRules, rule } from '../feed/fixtures.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-cli-feed-shard-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { THREATFEED_DATA_DIR: dir }

const store = await openEmbeddedStore(dir)
const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
const stored = await store.lists.create({ workspaceId: ws.id, name: 'stored', description: 'three shards', defaults: { shards: 3 }, selector: {} })
const plain = await store.lists.create({ workspaceId: ws.id, name: 'plain', description: '', defaults: {}, selector: {} })
/** Hosts two apart (none coalesce), in both families. */
const targets = [
  ...Array.from({ length: 60 }, (_, i) => `198.51.${i >> 4}.${(i & 15) * 2 + 1}/32`),
  ...Array.from({ length: 12 }, (_, i) => `2001:db8:${2 * i}::/48`),
]
await addRules(store, targets.map((v) => rule(ws.id, v)))
await store.close()

const get = (args: string[]): ReturnType<typeof runCommand> => runCommand(feedCommand, ['get', '--workspace', ws.id, ...args], { env })
const lines = (s: string): string[] => s.split('\n').filter((l) => l !== '')

t.test('the shards of the stored N partition the feed; --of asks for another N', async (t) => {
  const whole = await get(['--list', 'stored'])
  t.equal(whole.code, 0, whole.stderr)
  t.equal(lines(whole.stdout).length, targets.length)
  for (const [args, of] of [[[], 3], [['--of', '5'], 5], [['--of', '1'], 1]] as const) {
    const seen: string[] = []
    for (let i = 1; i <= of; i++) {
      const r = await get(['--list', 'stored', '--shard', String(i), ...args])
      t.equal(r.code, 0, r.stderr)
      seen.push(...lines(r.stdout))
      const a = await get(['--list', 'stored', '--format', 'dialect_a', '--shard', String(i), ...args])
      t.equal(lines(a.stdout)[6], `# shard: ${i}/${of}`, `dialect_a ${i}/${of}: the shard line after the six of SPEC 4.5`)
      t.equal(lines(a.stdout)[5], `# entries: ${lines(r.stdout).length}`, `dialect_a ${i}/${of}: the shard's own count`)
    }
    t.equal(new Set(seen).size, seen.length, `N = ${of}: no network in two shards`)
    t.same([...seen].sort(), lines(whole.stdout).sort(), `N = ${of}: the union is the feed`)
  }
  const json = JSON.parse((await get(['--list', 'plain', '--shard', '2', '--of', '2', '--json'])).stdout) as { status: number, etag: string, entries: number }
  t.match(json, { status: 200, etag: /^"/ })
  t.not(json.etag, JSON.parse((await get(['--list', 'plain', '--json'])).stdout).etag, 'a shard has its own ETag')
})

t.test('bad shard options: the server\'s 400, exit 2', async (t) => {
  const cases = [
    { description: 'shard 0', list: 'plain', args: ['--shard', '0', '--of', '2'], query: 'shard=0&of=2', message: 'unsupported shard: "0"' },
    { description: 'shard over 64', list: 'plain', args: ['--shard', '65', '--of', '64'], query: 'shard=65&of=64', message: 'unsupported shard: "65"' },
    { description: 'of over 64', list: 'plain', args: ['--shard', '1', '--of', '65'], query: 'shard=1&of=65', message: 'unsupported of: "65"' },
    { description: 'not a number', list: 'plain', args: ['--shard', 'x', '--of', '2'], query: 'shard=x&of=2', message: 'unsupported shard: "x"' },
    { description: 'leading zero', list: 'plain', args: ['--shard', '01', '--of', '2'], query: 'shard=01&of=2', message: 'unsupported shard: "01"' },
    { description: 'of alone', list: 'plain', args: ['--of', '3'], query: 'of=3', message: 'unsupported of=3 without shard: ask for shard=I&of=3, 1 ≤ I ≤ 3' },
    { description: 'of alone, stored N', list: 'stored', args: ['--of', '3'], query: 'of=3', message: 'unsupported of=3 without shard: ask for shard=I&of=3, 1 ≤ I ≤ 3' },
    { description: 'shard without of or a stored N', list: 'plain', args: ['--shard', '2'], query: 'shard=2', message: 'unsupported shard=2 without of, and the feed stores no shard count: ask for shard=I&of=N, 1 ≤ I ≤ N ≤ 64' },
    { description: 'shard over of', list: 'plain', args: ['--shard', '4', '--of', '3'], query: 'shard=4&of=3', message: 'unsupported shard=4 of 3: 1 ≤ shard ≤ of' },
    { description: 'shard over the stored N', list: 'stored', args: ['--shard', '4'], query: 'shard=4', message: 'unsupported shard=4 of 3: 1 ≤ shard ≤ of' },
    { description: 'shard over of, stored N', list: 'stored', args: ['--shard', '5', '--of', '4'], query: 'shard=5&of=4', message: 'unsupported shard=5 of 4: 1 ≤ shard ≤ of' },
  ]
  for (const c of cases) {
    const r = await get(['--list', c.list, ...c.args])
    t.equal(r.code, 2, `${c.description}: usage exit status`)
    t.equal(r.stderr, `threatfeed: ${c.message}\n`, `${c.description}: the message`)
    // What the feed route answers for the same query on the same list.
    const defaults = c.list === 'stored' ? stored.defaults : plain.defaults
    let http: unknown = null
    try {
      resolveVariant(parseFeedQuery(c.query), defaults)
    } catch (e) {
      if (isThreatfeedError(e)) http = { success: false, error: e.message, details: e.details }
    }
    t.not(http, null, `${c.description}: the server answers a 400 too`)
    t.same(JSON.parse(r.stdout), http, `${c.description}: the server's 400 body`)
  }
})
