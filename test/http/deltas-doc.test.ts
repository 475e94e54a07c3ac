/**
 * docs/deltas.md's appliance script, taken from the document and run as written (curl and sh)
 * against a running server, with `nft` acting on a set in a network namespace of its own: the
 * first run loads the full feed, a change comes as a delta, no change is a 304, and a base the
 * server does not hold falls back to the full feed — after each run the kernel's set is the feed.
 */
import t from 'tap'
import { execFile, spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { startRealServer } from '../helpers/real-server.js'

const run = promisify(execFile)
const has = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0
const NS = `tfdoc${process.pid}`
const usable = process.getuid?.() === 0 && has('nft') && has('curl') && spawnSync('ip', ['netns', 'add', NS]).status === 0

const doc = readFileSync(new URL('../../docs/deltas.md', import.meta.url), 'utf8')
const section = doc.slice(doc.indexOf('## An appliance script'))
const script = /```sh\n([\s\S]*?)```/.exec(section)![1]!

t.test('the appliance script is at most ten lines', async (t) => {
  t.ok(script.trim().split('\n').length <= 10, script)
})

t.test('the appliance script keeps an nftables set equal to the feed', { skip: usable ? false : 'needs root, nft, curl and ip netns' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-deltas-doc-'))
  const s = await startRealServer(join(dir, 'data'), { THREATFEED_FEED_REBUILD_MS: '0' })
  t.teardown(async () => {
    spawnSync('ip', ['netns', 'del', NS])
    await s.server.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  // `nft` on the script's PATH acts inside the namespace; curl stays on the host's loopback.
  const bin = join(dir, 'bin')
  mkdirSync(bin)
  writeFileSync(join(bin, 'nft'), `#!/bin/sh\nexec ip netns exec ${NS} ${spawnSync('sh', ['-c', 'command -v nft'], { encoding: 'utf8' }).stdout.trim()} "$@"\n`)
  chmodSync(join(bin, 'nft'), 0o755)
  const file = join(dir, 'appliance.sh')
  writeFileSync(file, script.replaceAll('http://localhost:8080', s.base))
  const state = join(dir, 'state')
  const env = { PATH: `${bin}:${process.env.PATH ?? ''}`, STATE: state, THREATFEED_KEY: s.key }

  const feed = async (): Promise<string[]> => {
    const r = await fetch(`${s.base}/v1/threat/feeds?format=plain&family=v4`, { headers: { authorization: `Bearer ${s.key}` } })
    return (await r.text()).split('\n').filter((l) => l !== '').map((n) => n.replace(/\/32$/, ''))
  }
  const kernelSet = (): string[] => {
    const r = spawnSync('ip', ['netns', 'exec', NS, 'nft', 'list', 'set', 'inet', 'threatfeed', 'blocklist_v4'], { encoding: 'utf8' })
    if (r.status !== 0) throw new Error(r.stderr)
    const m = /elements = \{([^}]*)\}/.exec(r.stdout)
    return m === null ? [] : m[1]!.split(',').map((e) => e.trim()).filter((e) => e !== '')
  }
  const headers = (): string => readFileSync(join(state, 'h'), 'utf8').toLowerCase()
  const settle = async (before: string[]): Promise<string[]> => {
    for (let i = 0; i < 100; i++) {
      const now = await feed()
      if (now.join() !== before.join()) return now
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error('the feed did not change')
  }
  const runScript = async (): Promise<void> => { await run('sh', [file], { env }) }

  await s.postBlocks(Array.from({ length: 30 }, (_, i) => `45.6.${i}.1`))
  let expected = await settle([])
  await runScript()
  t.notMatch(headers(), /x-feed-delta: delta/, 'the first run: the full feed')
  t.same(kernelSet().sort(), [...expected].sort(), 'the set holds the feed after the full load')

  await s.postBlocks(['45.7.0.1', '45.7.0.2', '45.6.0.0/24'])
  expected = await settle(expected)
  await runScript()
  t.match(headers(), /x-feed-delta: delta/, 'a change: a delta')
  t.same(kernelSet().sort(), [...expected].sort(), 'the set holds the feed after the delta')

  await runScript()
  t.match(headers(), /^http\/1\.1 304/, 'no change: 304')
  t.same(kernelSet().sort(), [...expected].sort(), 'the set is unchanged')

  writeFileSync(join(state, 'etag'), 'nftables.v4.block.identity.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')
  await s.postBlocks(['45.8.0.1'])
  expected = await settle(expected)
  await runScript()
  t.match(headers(), /x-feed-delta: full/, 'a base the server never sent: the full feed')
  t.same(kernelSet().sort(), [...expected].sort(), 'the set holds the feed after the fallback')
})
