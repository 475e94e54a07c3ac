/**
 * Feed deltas through HTTP, as an appliance applies them (docs/deltas.md): a server composed as
 * `threatfeed serve` does (front-end threads too, which hand deltas to the main thread) goes
 * through 30 random versions — hosts added and removed, a /25 pair coalescing into a /24 and
 * splitting back, an allow rule carving a blocked /24, IPv6 — and for every delta format, family,
 * action and shard below, the delta from the previous version applied to the previous full body
 * gives exactly the next full body, whose digest is X-Feed-Result-Digest:
 * - plain and json: a reference applier here;
 * - nftables: `nft -f` in a network namespace, `nft list set` compared with the full body;
 * - ipset: a reference applier, and `ipset restore` in the namespace, `ipset save` compared.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { startRealServer } from '../helpers/real-server.js'
import { rawRequest, type RawResponse } from '../helpers/feed-server.js'

// 30 versions × 12 variants × (delta + full), nft and ipset runs: minutes on a loaded machine.
t.setTimeout(600_000)
const dir = mkdtempSync(join(tmpdir(), 'tf-delta-chain-'))
const s = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '0', THREATFEED_HTTP_THREADS: '2' })
const NS = `tfdelta${process.pid}`
const isRoot = process.getuid?.() === 0
const has = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0
const netns = isRoot && has('ip') && spawnSync('ip', ['netns', 'add', NS]).status === 0
t.teardown(async () => {
  if (netns) spawnSync('ip', ['netns', 'del', NS])
  await s.server.stop()
  rmSync(dir, { recursive: true, force: true })
})
const inNs = (cmd: string, args: string[], input?: string): { status: number | null, stdout: string, stderr: string } =>
  spawnSync('ip', ['netns', 'exec', NS, cmd, ...args], { encoding: 'utf8', input })
const kernelNft = netns && has('nft') && inNs('nft', ['list', 'tables']).status === 0
const kernelIpset = netns && has('ipset') && inNs('ipset', ['list']).status === 0

const auth = { authorization: `Bearer ${s.key}` }
let seed = 30
const rand = (n: number): number => { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; return seed % n }

async function signal (ops: unknown[]): Promise<void> {
  const r = await fetch(`${s.base}/v2/signal`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(ops) })
  if (r.status >= 300) throw new Error(`signal: ${r.status} ${await r.text()}`)
}
const upsert = (ref: string, ip: string, action: 'block' | 'allow' = 'block'): unknown => ({ kind: 'access_rule', op: 'upsert', rule_ref: ref, rule: { target: { ip }, action } })
const remove = (ref: string): unknown => ({ kind: 'access_rule', op: 'delete', rule_ref: ref })

async function get (query: string, gzip: boolean): Promise<RawResponse> {
  return rawRequest(s.base, `/v1/threat/feeds?${query}`, { headers: { ...auth, ...(gzip ? { 'accept-encoding': 'gzip' } : {}) } })
}
const text = (r: RawResponse): string => (r.headers['content-encoding'] === 'gzip' ? gunzipSync(r.body) : r.body).toString()
const sha = (b: Buffer | string): string => `sha-256=:${createHash('sha256').update(b).digest('base64')}:`

/** Waits until the block feed moved from `etag` and then held still for a few polls. */
async function settled (etag: string): Promise<string> {
  let last = etag
  let still = 0
  for (let i = 0; i < 200; i++) {
    const r = await get('', false)
    const now = r.headers.etag!
    if (now !== etag && now === last) still++
    else still = 0
    last = now
    if (still >= 3) return now
    await new Promise((resolve) => setTimeout(resolve, 60))
  }
  throw new Error('the feed did not settle')
}

/** Feed order: IPv4 by address, then IPv6 by address (each key compares as a string of fixed width). */
function orderKey (cidr: string): string {
  const [addr, len] = cidr.split('/') as [string, string]
  if (!addr.includes(':')) return '4' + addr.split('.').map((o) => o.padStart(3, '0')).join('') + len.padStart(3, '0')
  const [head, tail = ''] = addr.split('::') as [string, string?]
  const h = head === '' ? [] : head.split(':')
  const tl = tail === '' ? [] : tail.split(':')
  const groups = addr.includes('::') ? [...h, ...Array(8 - h.length - tl.length).fill('0'), ...tl] : h
  return '6' + groups.map((g) => g.padStart(4, '0')).join('') + len.padStart(3, '0')
}
const sorted = (nets: Iterable<string>): string[] => [...nets].sort((a, b) => orderKey(a) < orderKey(b) ? -1 : orderKey(a) > orderKey(b) ? 1 : 0)

/** Applies removals then additions to an ordered list, as an appliance would; a removal of an absent network or an addition of a present one fails. */
function apply (before: string[], removed: string[], added: string[]): string[] {
  const set = new Set(before)
  for (const n of removed) { if (!set.delete(n)) throw new Error(`delta removes ${n}, which the base does not hold`) }
  for (const n of added) { if (set.has(n)) throw new Error(`delta adds ${n}, which the base holds`); set.add(n) }
  return sorted(set)
}
const inOrder = (nets: string[]): boolean => nets.every((n, i) => i === 0 || orderKey(nets[i - 1]!) < orderKey(n))

interface Case {
  readonly query: string
  readonly format: 'plain' | 'nftables' | 'ipset' | 'json'
  /** For the kernel check: nftables table/set, ipset set. */
  readonly table?: string
  readonly set?: string
  readonly family?: 'v4' | 'v6'
}
const CASES: Case[] = [
  { query: 'format=plain', format: 'plain' },
  { query: 'format=plain&family=v6', format: 'plain' },
  { query: 'format=plain&action=allow', format: 'plain' },
  { query: 'format=plain&shard=2&of=3', format: 'plain' },
  { query: 'format=json', format: 'json' },
  { query: 'format=json&family=v4&shard=1&of=3', format: 'json' },
  { query: 'format=nftables&family=v4', format: 'nftables', table: 'threatfeed', set: 'blocklist_v4', family: 'v4' },
  { query: 'format=nftables&family=v6', format: 'nftables', table: 'threatfeed', set: 'blocklist_v6', family: 'v6' },
  { query: 'format=nftables&family=v4&shard=3&of=3&table=shards&set=third', format: 'nftables', table: 'shards', set: 'third', family: 'v4' },
  { query: 'format=ipset&family=v4', format: 'ipset', set: 'threatfeed', family: 'v4' },
  { query: 'format=ipset&family=v6&set=tf6', format: 'ipset', set: 'tf6', family: 'v6' },
  { query: 'format=ipset&family=v4&shard=1&of=3&set=tfs1', format: 'ipset', set: 'tfs1', family: 'v4' },
]

/** The networks of a full body, in its order. */
function networksOf (format: Case['format'], body: string): string[] {
  switch (format) {
    case 'plain': return body.split('\n').filter((l) => l !== '')
    case 'json': {
      const j = JSON.parse(body) as { deleted: string[], new: string[] }
      if (j.deleted.length !== 0) throw new Error('a full json body deletes nothing')
      return j.new
    }
    case 'nftables': return body === '' ? [] : body.replace(/^elements = \{ /, '').replace(/ \}\n$/, '').split(', ')
    case 'ipset': return body.split('\n').filter((l) => /^add \S+-new /.test(l)).map((l) => l.split(' ')[2]!)
  }
}

/** What a delta body removes and adds, checking its syntax on the way. */
function changesOf (c: Case, body: string): { removed: string[], added: string[] } {
  const removed: string[] = []
  const added: string[] = []
  if (c.format === 'json') {
    const j = JSON.parse(body) as { deleted: string[], new: string[] }
    return { removed: j.deleted, added: j.new }
  }
  let adding = false
  for (const line of body.split('\n').filter((l) => l !== '')) {
    let m: RegExpExecArray | null
    if (c.format === 'plain' && (m = /^([+-])(\S+)$/.exec(line)) !== null) {
      if (m[1] === '+') adding = true
      else if (adding) throw new Error('a removal after an addition')
      ;(m[1] === '+' ? added : removed).push(m[2]!)
    } else if (c.format === 'nftables' && (m = /^(delete|add) element inet (\S+) (\S+) \{ (.+) \}$/.exec(line)) !== null) {
      if (m[2] !== c.table || m[3] !== c.set) throw new Error(`names: ${line.slice(0, 60)}`)
      ;(m[1] === 'add' ? added : removed).push(...m[4]!.split(', '))
    } else if (c.format === 'ipset' && (m = /^(del|add) (\S+) (\S+) -exist$/.exec(line)) !== null) {
      if (m[2] !== c.set) throw new Error(`names: ${line}`)
      ;(m[1] === 'add' ? added : removed).push(m[3]!)
    } else {
      throw new Error(`not a ${c.format} delta line: ${line.slice(0, 80)}`)
    }
  }
  return { removed, added }
}

/** nft and ipset print a host without its /32 or /128. */
const host = (n: string): string => n.replace(/\/(32|128)$/, '')

function nftLoad (c: Case, full: string): void {
  // The set emptied and filled in one transaction, beside the other sets of its table.
  const type = `type ${c.family === 'v6' ? 'ipv6_addr' : 'ipv4_addr'}; flags interval;`
  const def = `table inet ${c.table!} {\n  set ${c.set!} { ${type} }\n}\nflush set inet ${c.table!} ${c.set!}\n` +
    (full === '' ? '' : `table inet ${c.table!} {\n  set ${c.set!} {\n    ${type}\n    ${full}  }\n}\n`)
  const file = join(dir, `${c.set!}.nft`)
  writeFileSync(file, def)
  const r = inNs('nft', ['-f', file])
  if (r.status !== 0) throw new Error(`nft -f (full): ${r.stderr}`)
}
function nftApply (c: Case, delta: string): void {
  const file = join(dir, `${c.set!}-delta.nft`)
  writeFileSync(file, delta)
  const r = inNs('nft', ['-f', file])
  if (r.status !== 0) throw new Error(`nft -f (delta): ${r.stderr}`)
}
function nftElements (c: Case): string[] {
  const r = inNs('nft', ['list', 'set', 'inet', c.table!, c.set!])
  if (r.status !== 0) throw new Error(`nft list set: ${r.stderr}`)
  const m = /elements = \{([^}]*)\}/.exec(r.stdout)
  return m === null ? [] : m[1]!.split(',').map((e) => e.trim()).filter((e) => e !== '')
}
function ipsetRestore (input: string): void {
  const r = inNs('ipset', ['restore'], input)
  if (r.status !== 0) throw new Error(`ipset restore: ${r.stderr}`)
}
function ipsetMembers (c: Case): string[] {
  const r = inNs('ipset', ['save', c.set!])
  if (r.status !== 0) throw new Error(`ipset save: ${r.stderr}`)
  return r.stdout.split('\n').filter((l) => l.startsWith('add ')).map((l) => l.split(' ')[2]!)
}
const sameSet = (a: string[], b: string[]): boolean => a.length === b.length && a.map(host).sort().join() === b.map(host).sort().join()

t.test('30 versions: every delta applied to the previous full body is the next full body', async (t) => {
  // Version 0: 600 hosts, some IPv6, a blocked /24 for the allow rule to carve.
  const hosts: string[] = []
  let nextHost = 0
  const newHost = (): string => {
    const ref = `h${nextHost++}`
    hosts.push(ref)
    return ref
  }
  const hostIp = (): string => rand(8) === 0 ? `2001:db8:${rand(0xffff).toString(16)}::${(rand(0xfffe) + 1).toString(16)}/128` : `45.${rand(4)}.${rand(256)}.${rand(256)}/32`
  const initial: unknown[] = [upsert('carved', '45.8.1.0/24'), upsert('v6net', '2001:db8:ffff::/48')]
  for (let i = 0; i < 600; i++) initial.push(upsert(newHost(), hostIp()))
  await signal(initial)
  let etag = await settled('')

  interface State { etag: string, body: string, networks: string[] }
  const states = new Map<Case, State>()
  for (const c of CASES) {
    const r = await get(c.query, false)
    t.equal(r.status, 200, `${c.query}: full`)
    const body = text(r)
    const state = { etag: r.headers.etag!, body, networks: networksOf(c.format, body) }
    states.set(c, state)
    if (c.format === 'nftables' && kernelNft) nftLoad(c, body)
    if (c.format === 'ipset' && kernelIpset) ipsetRestore(body)
  }

  const answered = { delta: 0, full: 0, kernel: 0 }
  const problems: string[] = []
  for (let round = 1; round <= 30; round++) {
    const ops: unknown[] = []
    for (let i = 0; i < 1 + rand(12); i++) ops.push(upsert(newHost(), hostIp()))
    ops.push(upsert(newHost(), `2001:db8:${round.toString(16)}::${(rand(0xfffe) + 1).toString(16)}/128`))
    for (let i = 0; i < rand(8) && hosts.length > 50; i++) ops.push(remove(hosts.splice(rand(hosts.length), 1)[0]!))
    // A /25 pair (a /24 in the feed) in odd rounds, one half of it in even rounds: a merge, then a split.
    const pair = 16 + (round >> 1)
    if (round % 2 === 1) ops.push(upsert(`pair${pair}a`, `45.9.${pair}.0/25`), upsert(`pair${pair}b`, `45.9.${pair}.128/25`))
    else ops.push(remove(`pair${pair}b`))
    // The allow rule carves the blocked /24 every third round, and lets go of it the round after.
    if (round % 3 === 0) ops.push(upsert('hole', `45.8.1.${16 * rand(16)}/28`, 'allow'))
    if (round % 3 === 1 && round > 1) ops.push(remove('hole'))
    await signal(ops)
    etag = await settled(etag)

    const gzip = round % 2 === 0
    for (const c of CASES) {
      const before = states.get(c)!
      // A rebuild between the two requests (a lapse) moves the feed again: ask again.
      for (let attempt = 0; ; attempt++) {
        const d = await get(`${c.query}&since=${encodeURIComponent(before.etag)}`, gzip)
        const f = await get(c.query, gzip)
        if (d.headers.etag !== f.headers.etag && attempt < 3) continue
        const where = `round ${round} ${c.query}${gzip ? ' (gzip)' : ''}`
        if (d.status === 304) {
          // The base's tag may be of the other encoding: what must hold is that nothing changed.
        if (text(f) !== before.body || d.headers.etag !== f.headers.etag) problems.push(`${where}: 304 for a variant that changed`)
          break
        }
        const fullBody = text(f)
        const next = networksOf(c.format, fullBody)
        if (d.headers['x-feed-delta'] !== 'delta') {
          answered.full++
          if (text(d) !== fullBody) problems.push(`${where}: a full answer that is not the full body`)
          if (c.format === 'nftables' && kernelNft) nftLoad(c, fullBody)
          if (c.format === 'ipset' && kernelIpset) ipsetRestore(fullBody)
          states.set(c, { etag: f.headers.etag!, body: fullBody, networks: next })
          break
        }
        answered.delta++
        const body = text(d)
        if (d.headers['content-digest'] !== sha(d.body)) problems.push(`${where}: Content-Digest is not that of the body sent`)
        if (d.headers['x-feed-result-digest'] !== sha(fullBody)) problems.push(`${where}: X-Feed-Result-Digest is not the next full body's`)
        if (d.headers['x-feed-delta-base'] !== before.etag) problems.push(`${where}: X-Feed-Delta-Base ${d.headers['x-feed-delta-base']}`)
        if (d.headers['last-modified'] !== f.headers['last-modified']) problems.push(`${where}: Last-Modified differs from the full answer's`)
        if ((d.headers['content-encoding'] === 'gzip') !== gzip) problems.push(`${where}: encoding`)
        const { removed, added } = changesOf(c, body)
        if (!inOrder(removed) || !inOrder(added)) problems.push(`${where}: a delta list out of the feed's order`)
        if (String(removed.length) !== d.headers['x-feed-delta-removed'] || String(added.length) !== d.headers['x-feed-delta-added']) problems.push(`${where}: counts`)
        const applied = apply(before.networks, removed, added)
        if (applied.join('\n') !== next.join('\n')) problems.push(`${where}: applied delta ≠ next full body`)
        if (c.format === 'nftables' && kernelNft) {
          nftApply(c, body)
          if (!sameSet(nftElements(c), next)) problems.push(`${where}: nft list set ≠ next full body`)
          answered.kernel++
        }
        if (c.format === 'ipset' && kernelIpset) {
          ipsetRestore(body)
          if (!sameSet(ipsetMembers(c), next)) problems.push(`${where}: ipset save ≠ next full body`)
          answered.kernel++
        }
        states.set(c, { etag: d.headers.etag!, body: fullBody, networks: next })
        break
      }
    }
  }

  t.same(problems, [], 'every delta applied gives the next full body')
  t.ok(answered.delta >= 300, `deltas answered: ${answered.delta}, full: ${answered.full}`)
  t.ok(!isRoot || kernelNft, 'nft ran in a network namespace (root, nftables installed)')
  t.ok(!isRoot || kernelIpset, 'ipset ran in a network namespace (root, ipset installed)')
  t.comment(`kernel checks: ${answered.kernel}`)
})
