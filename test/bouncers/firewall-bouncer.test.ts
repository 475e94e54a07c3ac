/**
 * Debian's `crowdsec-firewall-bouncer` in nftables mode against threatfeed (issue 31), with the
 * config of docs/bouncers-configs.md, in a network namespace reached over a veth pair: its
 * kernel sets hold exactly the feed's networks after a startup pull of 131,072 decisions and
 * after 5 rounds of changes; the elements carry timeouts no longer than their rules live; and
 * with the service stopped, a lapsing rule's element leaves the kernel set within the bound
 * while every other stays.
 *
 * nftables mode of 0.0.25 has no interval sets (a Range decision becomes its first address:
 * docs/bouncers-configs.md), so this set is hosts only, two apart so none coalesce; ranges are
 * the custom bouncer's test.
 *
 * TF_FIREWALL_ENTRIES sets the startup size: 2,000 by default, so the suite stays in CI's time.
 * The issue's 131,072 is TF_FIREWALL_ENTRIES=131072: the bouncer itself inserts a few hundred
 * elements a second and slower as the set grows (2,606 s for 131,072 from threatfeed; from
 * CrowdSec's own LAPI, 113,401 after 39.7 minutes — bench/NOTES.md "CrowdSec bouncer API against CrowdSec's LAPI").
 */
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { allow, block, difference, docConfig, Forwarder, hasTool, makeBouncerFixture, plainFeed, sameSet, serveEnv, signal, sleep, spacedHosts, spawnServe, unblock, within } from '../helpers/bouncers.js'

const BIN = '/usr/bin/crowdsec-firewall-bouncer'
const isRoot = process.getuid?.() === 0
const NS = `tfbnc${process.pid}`
const usable = isRoot && hasTool('ip') && hasTool('nft') && hasTool(BIN) && spawnSync('ip', ['netns', 'add', NS]).status === 0
if (!usable) {
  t.comment('skipped: needs root, ip netns, nft and crowdsec-firewall-bouncer (apt-get install nftables crowdsec-firewall-bouncer)')
  process.exit(0)
}
const ENTRIES = Number(process.env.TF_FIREWALL_ENTRIES ?? 2000)
t.setTimeout(ENTRIES > 10_000 ? 5_400_000 : 600_000)

const UPDATE_MS = 1000
const REBUILD_MS = 1000
const BOUND_MS = 2 * UPDATE_MS + REBUILD_MS
const SLACK_MS = Number(process.env.TF_BOUNCER_SLACK_MS ?? 2000)

const inNs = (cmd: string, args: string[]): { status: number | null, stdout: string, stderr: string } =>
  spawnSync('ip', ['netns', 'exec', NS, cmd, ...args], { encoding: 'utf8', maxBuffer: 1 << 28 })
// A veth pair: the host side carries the forwarder the bouncer's api_url names.
const octet = 1 + (process.pid % 250)
const hostIp = `10.250.${octet}.1`
const nsIp = `10.250.${octet}.2`
const veth = `tfb${process.pid % 100000}`
for (const args of [
  ['link', 'add', `${veth}h`, 'type', 'veth', 'peer', 'name', `${veth}n`],
  ['link', 'set', `${veth}n`, 'netns', NS],
  ['addr', 'add', `${hostIp}/30`, 'dev', `${veth}h`],
  ['link', 'set', `${veth}h`, 'up'],
]) if (spawnSync('ip', args).status !== 0) throw new Error(`ip ${args.join(' ')} failed`)
for (const args of [['addr', 'add', `${nsIp}/30`, 'dev', `${veth}n`], ['link', 'set', `${veth}n`, 'up'], ['link', 'set', 'lo', 'up']]) {
  if (inNs('ip', args).status !== 0) throw new Error(`ip ${args.join(' ')} in the namespace failed`)
}

const hosts = spacedHosts(0x0a000000, ENTRIES)
const f = await makeBouncerFixture(hosts)
const env = serveEnv(f.dir, { THREATFEED_FEED_REBUILD_MS: String(REBUILD_MS) })
let server = await spawnServe(env)
const fwd = new Forwarder(server.port)
await fwd.listen(hostIp)
const config = join(f.dir, 'firewall.yaml')
writeFileSync(config, docConfig('crowdsec-firewall-bouncer.yaml', {
  api_url: `http://${hostIp}:${fwd.port}/`,
  api_key: f.key,
  pid_dir: `${f.dir}/`,
  log_dir: `${f.dir}/`,
  update_frequency: `${UPDATE_MS / 1000}s`,
}))
let bouncer: ReturnType<typeof spawn> | null = null
t.teardown(async () => {
  if (bouncer !== null && bouncer.exitCode === null) {
    bouncer.kill('SIGTERM')
    await new Promise((resolve) => bouncer!.once('exit', resolve))
  }
  await fwd.close()
  await server.stop()
  spawnSync('ip', ['netns', 'del', NS])
  spawnSync('ip', ['link', 'del', `${veth}h`])
  rmSync(f.dir, { recursive: true, force: true })
})

interface Element { readonly value: string, readonly timeout: number | null }
/** The elements of one of the bouncer's sets (nft prints a host without its /32 or /128). */
function kernelSet (family: 'ip' | 'ip6'): Element[] | null {
  const [table, set] = family === 'ip' ? ['crowdsec', 'crowdsec-blacklists'] : ['crowdsec6', 'crowdsec6-blacklists']
  const r = inNs('nft', ['-j', 'list', 'set', family, table, set])
  if (r.status !== 0) return null
  const doc = JSON.parse(r.stdout) as { nftables: Array<{ set?: { elem?: unknown[] } }> }
  const elems = doc.nftables.find((x) => x.set !== undefined)?.set?.elem ?? []
  return elems.map((e) => {
    if (typeof e === 'string') return { value: e, timeout: null }
    const inner = (e as { elem: { val: unknown, timeout?: number } }).elem
    const val = inner.val
    const value = typeof val === 'string' ? val : `${(val as { prefix: { addr: string, len: number } }).prefix.addr}/${(val as { prefix: { addr: string, len: number } }).prefix.len}`
    return { value, timeout: inner.timeout ?? null }
  })
}
const kernelValues = (): Set<string> | null => {
  const v4 = kernelSet('ip')
  const v6 = kernelSet('ip6')
  return v4 === null || v6 === null ? null : new Set([...v4, ...v6].map((e) => e.value))
}
const bare = (feed: Set<string>): Set<string> => new Set([...feed].map((n) => n.replace(/\/(32|128)$/, '')))

let feed: Set<string> | null = null
async function settledFeed (port: number, ready: (feed: Set<string>) => boolean): Promise<Set<string>> {
  let last: Set<string> | null = null
  let still = 0
  for (let i = 0; i < 1200; i++) {
    const now = await plainFeed(port, f.key)
    if (now !== null && ready(now) && last !== null && sameSet(now, last)) still++
    else still = 0
    last = now
    if (still >= 3) return now!
    await sleep(200)
  }
  throw new Error('the feed did not settle within 4 minutes')
}

const LAPSING = '11.0.1.1'
let lapseAt = 0

t.test('the firewall bouncer\'s nftables sets follow the feed', async (t) => {
  feed = await settledFeed(server.port, (now) => now.size === ENTRIES)
  t.ok([...feed].every((n) => /\/(32|128)$/.test(n)), 'the feed holds hosts only (nftables mode applies no ranges)')
  const started = Date.now()
  bouncer = spawn('ip', ['netns', 'exec', NS, BIN, '-c', config], { stdio: 'ignore' })
  const want0 = bare(feed)
  const startupMs = await within(3_600_000, () => { const k = kernelValues(); return k !== null && sameSet(k, want0) }, 10_000)
  const k0 = kernelValues() ?? new Set<string>()
  t.ok(startupMs >= 0, `after the startup pull the kernel sets hold exactly the feed's ${want0.size} networks (${startupMs} ms)${startupMs < 0 ? `: ${difference(k0, want0)}` : ''}`)
  t.comment(`startup pull of ${ENTRIES} decisions applied in ${((Date.now() - started) / 1000).toFixed(0)} s`)
  const timeouts = (kernelSet('ip') ?? []).map((e) => e.timeout)
  t.ok(timeouts.length > 0 && timeouts.every((x) => x !== null && x > 0 && x <= 86_400), 'every element has a timeout, at most THREATFEED_BOUNCER_MAX_DURATION (24h)')

  const changed = async (name: string, ops: unknown[], ready: (feed: Set<string>) => boolean): Promise<void> => {
    const t0 = Date.now()
    if (ops.length > 0) await signal(server.port, f.key, ops)
    feed = await settledFeed(server.port, ready)
    const want = bare(feed)
    const ms = await within(BOUND_MS + SLACK_MS + 30_000, () => { const k = kernelValues(); return k !== null && sameSet(k, want) }, 200)
    const elapsed = Date.now() - t0
    t.ok(ms >= 0, `${name}: the kernel sets hold exactly the feed's ${want.size} networks${ms < 0 ? `: ${difference(kernelValues() ?? new Set(), want)}` : ''}`)
    t.ok(ms >= 0 && elapsed <= BOUND_MS + SLACK_MS, `${name}: within ${BOUND_MS} ms (+${SLACK_MS} ms of scheduling): ${elapsed} ms`)
  }
  const added = spacedHosts(0x0b000000, 40)
  const v6 = Array.from({ length: 8 }, (_, i) => `2001:db8:7::${(i * 2 + 1).toString(16)}`)
  // 131,072 is the feed's default cap: allows lift 64 seeded hosts in the round that adds 48.
  await changed('1 adds (IPv4 and IPv6), allows lifting seeded hosts', [...hosts.slice(1000, 1064).map((ip, i) => allow(`y${i}`, ip)), ...added.map((ip, i) => block(`a${i}`, ip)), ...v6.map((ip, i) => block(`v${i}`, ip))], (now) => now.has('11.0.0.0/32') && now.has(`${v6[7]!}/128`) && !now.has(`${hosts[1000]!}/32`))
  await changed('2 unblocks, and allows lifting seeded hosts', [...added.slice(0, 20).map((_, i) => unblock(`a${i}`)), ...hosts.slice(0, 10).map((ip, i) => allow(`x${i}`, ip))], (now) => !now.has('11.0.0.0/32') && !now.has(`${hosts[0]!}/32`))
  lapseAt = Date.now() + 60_000
  await changed('3 a host whose rule lapses in 60 s, and more adds', [block('lapse', LAPSING, 60), block('b1', '11.0.2.1'), block('b2', '2001:db8:8::1')], (now) => now.has(`${LAPSING}/32`))
  const lapsing = (kernelSet('ip') ?? []).find((e) => e.value === LAPSING)
  t.ok(lapsing !== undefined && lapsing.timeout !== null && lapsing.timeout <= 60, `the lapsing host's element times out with its rule (${lapsing?.timeout ?? 'none'} s)`)
  await changed('4 allows removed: seeded hosts back', hosts.slice(0, 5).map((_, i) => unblock(`x${i}`)), (now) => now.has(`${hosts[0]!}/32`))
  await changed('5 a mix', [unblock('v0'), block('b3', '11.0.2.3'), allow('x10', hosts[100]!)], (now) => now.has('11.0.2.3/32') && !now.has(`${hosts[100]!}/32`))

  // The service stopped: the kernel drops the lapsing host on its own, and nothing else.
  const before = bare(feed)
  await server.stop()
  await sleep(Math.max(0, lapseAt - Date.now()) + BOUND_MS + SLACK_MS)
  const after = kernelValues() ?? new Set<string>()
  t.notOk(after.has(LAPSING), 'with the service stopped, the lapsed host left the kernel set within the bound')
  before.delete(LAPSING)
  t.ok(sameSet(after, before), `with the service stopped, every other entry stayed${sameSet(after, before) ? '' : `: ${difference(after, before)}`}`)
  t.equal(bouncer.exitCode, null, 'the bouncer kept running while the service was stopped')
  // The same server back, for the teardown.
  server = await spawnServe(env)
})
