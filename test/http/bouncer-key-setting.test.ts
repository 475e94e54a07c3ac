/**
 * Which set a key's bouncers receive (docs/bouncers.md): set with `threatfeed key bouncer` while
 * the server runs; the bouncer's next pull deletes what it held of the old set and sends the new
 * one; `key ls` shows the setting. Then the cursor survives a restart: the same content after
 * the restart answers a pull with nothing to delete or add but what the refresh re-sends.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startRealServer, type RealServer } from '../helpers/real-server.js'
import { runCommand } from '../helpers/cli.js'
import { keyCommand } from '../../src/cli/key.js'
import { listCommand } from '../../src/cli/list.js'

t.setTimeout(240_000)

interface Decision { duration: string, scope: string, value: string }
interface StreamAnswer { new: Decision[] | null, deleted: Decision[] | null }

t.test('a key setting changes the set; the cursor survives a restart', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-bouncer-key-'))
  let s: RealServer = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '0', THREATFEED_CONSUMER_STALE: '2s' })
  t.teardown(async () => {
    await s.server.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  const env = { ...process.env, THREATFEED_DATA_DIR: dir, THREATFEED_LOG_LEVEL: 'silent' }
  const cli = async (args: string[]): Promise<string> => {
    const r = await runCommand(args[0] === 'list' ? listCommand : keyCommand, args.slice(1), { env })
    if (r.code !== 0) throw new Error(`${args.join(' ')}: ${r.code} ${r.stderr}`)
    return r.stdout
  }
  const keys = JSON.parse(await cli(['key', 'ls', '--json'])) as Array<{ id: string, workspace: string }>
  const keyId = keys[0]!.id
  const ws = keys[0]!.workspace
  const list = JSON.parse(await cli(['list', 'create', '--workspace', ws, '--name', 'team-a', '--select', 'team=a', '--json'])) as { id: string }

  const post = async (ops: unknown[]): Promise<void> => {
    const r = await fetch(`${s.base}/v2/signal`, { method: 'POST', headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' }, body: JSON.stringify(ops) })
    if (r.status >= 300) throw new Error(`signal: ${r.status} ${await r.text()}`)
  }
  await post([
    { kind: 'access_rule', op: 'upsert', rule_ref: 'a', rule: { target: { ip: '192.0.2.7' }, action: 'block' }, labels: { team: 'a' } },
    { kind: 'access_rule', op: 'upsert', rule_ref: 'b', rule: { target: { ip: '198.51.100.1' }, action: 'block' }, labels: { team: 'b' } },
  ])
  const pull = async (query: string): Promise<StreamAnswer> => {
    const r = await fetch(`${s.base}/v1/decisions/stream?${query}`, { headers: { 'x-api-key': s.key, 'user-agent': 'crowdsec-firewall-bouncer/v0.0.31' } })
    t.equal(r.status, 200)
    return await r.json() as StreamAnswer
  }
  const values = (ds: Decision[] | null): string[] => (ds ?? []).map((d) => d.value).sort()
  let first: StreamAnswer = { new: null, deleted: null }
  for (let i = 0; i < 200 && (first.new?.length ?? 0) < 2; i++) {
    first = await pull('startup=true')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.same(values(first.new), ['192.0.2.7', '198.51.100.1'], 'by default: the workspace feed')

  t.match(await cli(['key', 'bouncer', '--id', keyId, '--list', 'team-a']), /bouncers receive the block networks of list /)
  const shown = JSON.parse(await cli(['key', 'ls', '--json'])) as Array<{ bouncer?: unknown }>
  t.same(shown[0]!.bouncer, { list: list.id, action: 'block' }, 'key ls shows the setting')
  let moved: StreamAnswer = { new: null, deleted: null }
  for (let i = 0; i < 100 && moved.deleted === null; i++) {
    moved = await pull('')
    if (moved.deleted === null) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.same(values(moved.deleted), ['198.51.100.1'], 'what the old set had and the new has not: deleted')
  t.same(values(moved.new), ['192.0.2.7'], 'the new set: new')
  t.match(moved.new![0], { scenario: 'threatfeed:team-a' }, 'the scenario names the list')
  t.same(await pull(''), { new: null, deleted: null })

  // The cursor is in the store with the consumer's record: a restarted server knows it.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  const consumers = await runCommand((await import('../../src/cli/consumers.js')).consumersCommand, ['ls', '--json'], { env })
  t.match(consumers.stdout, /crowdsec-firewall-bouncer/, 'the bouncer is a consumer in `consumers ls`')
  await s.server.stop()
  s = await startRealServer(dir, { THREATFEED_FEED_REBUILD_MS: '0', THREATFEED_CONSUMER_STALE: '2s' }, { key: s.key })
  let after: StreamAnswer | null = null
  for (let i = 0; i < 100 && after === null; i++) {
    try {
      after = await pull('')
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  t.same(values(after!.new), ['192.0.2.7'], 'after a restart: the set again (its durations are not known here), nothing wrongly deleted')
  t.equal(after!.deleted, null)
  t.same(await pull(''), { new: null, deleted: null }, 'then idle again')
})
