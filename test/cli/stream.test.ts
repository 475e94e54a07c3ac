import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../../src/store/open.js'
import { streamCommand } from '../../src/cli/stream.js'
import { runCommand } from '../helpers/cli.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-stream-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { THREATFEED_DATA_DIR: dir }

const T = Date.UTC(2026, 0, 2, 3, 4, 5)
const v1text = '{ "type":"access_rules",\n "action":"block", "ip":"192.0.2.1" }'
const store = await openStore({ kind: 'embedded', dataDir: dir })
await store.stream.append([
  { workspaceId: 'w1', payload: v1text, acceptedAt: T },
  { workspaceId: 'w1', schemaVersion: 2, payload: '{"schema_version":2,"kind":"waf_rule","op":"delete","rule_ref":"r"}', acceptedAt: T + 1 },
  ...Array.from({ length: 5 }, (_, i) => ({ workspaceId: 'w2', payload: `{"n":${i}}`, acceptedAt: T + 2 })),
])
await store.stream.setCheckpoint('rules', 4)
await store.close()

t.test('tail --from SEQ --json: records as stored, schemaVersion only on v2', async (t) => {
  const r = await runCommand(streamCommand, ['tail', '--from', '1', '--limit', '2', '--json'], { env })
  t.equal(r.code, 0, r.stderr)
  t.same(JSON.parse(r.stdout), [
    { seq: 1, workspace: 'w1', acceptedAt: '2026-01-02T03:04:05.000Z', payload: v1text },
    { seq: 2, workspace: 'w1', schemaVersion: 2, acceptedAt: '2026-01-02T03:04:05.001Z', payload: '{"schema_version":2,"kind":"waf_rule","op":"delete","rule_ref":"r"}' },
  ])
})

t.test('tail without --from shows the last records; past the head is empty', async (t) => {
  const last = JSON.parse((await runCommand(streamCommand, ['tail', '--limit', '3', '--json'], { env })).stdout) as Array<{ seq: number }>
  t.same(last.map((x) => x.seq), [5, 6, 7])
  t.same(JSON.parse((await runCommand(streamCommand, ['tail', '--from', '100', '--json'], { env })).stdout), [])
})

t.test('text output keeps one record per line', async (t) => {
  const r = await runCommand(streamCommand, ['tail', '--from', '1', '--limit', '2'], { env })
  t.same(r.stdout.split('\n'), [
    `1  2026-01-02T03:04:05.000Z  w1  -  ${JSON.stringify(v1text)}`,
    '2  2026-01-02T03:04:05.001Z  w1  v2  {"schema_version":2,"kind":"waf_rule","op":"delete","rule_ref":"r"}',
    '',
  ])
})

t.test('status', async (t) => {
  const status = JSON.parse((await runCommand(streamCommand, ['status', '--json'], { env })).stdout) as { retained: { bytes: number } }
  t.ok(status.retained.bytes > 0, 'the stream takes some bytes')
  t.same(status, { head: 7, checkpoint: 4, lag: 3, checkpoints: { rules: 4 }, retained: { first: 1, last: 7, records: 7, bytes: status.retained.bytes } }, 'nothing trimmed yet')
  t.equal((await runCommand(streamCommand, ['status'], { env })).stdout, `head 7, applied up to 4 (lag 3); positions 1–7 kept: 7 records, ${status.retained.bytes} bytes\ncheckpoints: rules at 4\n`)
})

t.test('a trimmed stream: tail before the first position kept is an error naming it; status shows the range kept', async (t) => {
  const trimDir = mkdtempSync(join(tmpdir(), 'tf-stream-cli-trim-'))
  t.teardown(() => rmSync(trimDir, { recursive: true, force: true }))
  const trimEnv = { THREATFEED_DATA_DIR: trimDir }
  const s = await openStore({ kind: 'embedded', dataDir: trimDir })
  for (let a = 0; a < 4; a++) await s.stream.append(Array.from({ length: 5 }, (_, i) => ({ workspaceId: 'w4', payload: `{"a":${a},"i":${i}}`, acceptedAt: T })))
  await s.stream.setCheckpoint('rules', 12)
  t.same(await s.stream.trim(T + 1, 100), { records: 10, more: false }, 'two appends of five go; the one holding the checkpoint stays')
  await s.close()

  const cases: Array<{ args: string[], code: number, seqs?: number[], stderr?: RegExp }> = [
    { args: ['--from', '1'], code: 1, stderr: /^threatfeed: stream position 1 was trimmed; the first position still kept is 11\n$/ },
    { args: ['--from', '10', '--limit', '1'], code: 1, stderr: /stream position 10 was trimmed; the first position still kept is 11/ },
    { args: ['--from', '0'], code: 1, stderr: /stream position 0 was trimmed; the first position still kept is 11/ },
    { args: ['--from', '11', '--limit', '2'], code: 0, seqs: [11, 12] },
    { args: ['--limit', '100'], code: 0, seqs: [11, 12, 13, 14, 15, 16, 17, 18, 19, 20] },
    { args: ['--from', '21'], code: 0, seqs: [] },
  ]
  for (const c of cases) {
    const r = await runCommand(streamCommand, ['tail', ...c.args, '--json'], { env: trimEnv })
    t.equal(r.code, c.code, `tail ${c.args.join(' ')}`)
    if (c.seqs !== undefined) t.same((JSON.parse(r.stdout) as Array<{ seq: number }>).map((x) => x.seq), c.seqs, `tail ${c.args.join(' ')}`)
    if (c.stderr !== undefined) {
      t.match(r.stderr, c.stderr)
      t.equal(r.stdout, '', 'nothing on stdout')
    }
  }
  const status = JSON.parse((await runCommand(streamCommand, ['status', '--json'], { env: trimEnv })).stdout) as { retained: { bytes: number } }
  t.same(status, { head: 20, checkpoint: 12, lag: 8, checkpoints: { rules: 12 }, retained: { first: 11, last: 20, records: 10, bytes: status.retained.bytes } })
  t.match((await runCommand(streamCommand, ['status'], { env: trimEnv })).stdout, /^head 20, applied up to 12 \(lag 8\); positions 11–20 kept: 10 records, \d+ bytes\ncheckpoints: rules at 12\n$/)
})

t.test('forget: a stale checkpoint stops holding back the trim; the server\'s own only with --force', async (t) => {
  const fDir = mkdtempSync(join(tmpdir(), 'tf-stream-cli-forget-'))
  t.teardown(() => rmSync(fDir, { recursive: true, force: true }))
  const fEnv = { THREATFEED_DATA_DIR: fDir }
  const s = await openStore({ kind: 'embedded', dataDir: fDir })
  for (let a = 0; a < 4; a++) await s.stream.append(Array.from({ length: 5 }, (_, i) => ({ workspaceId: 'w5', payload: `{"a":${a},"i":${i}}`, acceptedAt: T })))
  await s.stream.setCheckpoint('rules', 17)
  await s.stream.setCheckpoint('old-node', 2)
  t.same(await s.stream.trim(T + 1, 100), { records: 0, more: false }, 'the stale checkpoint holds the trim back')
  await s.close()

  const status = async (): Promise<{ checkpoints: Record<string, number>, retained: { first: number } }> => JSON.parse((await runCommand(streamCommand, ['status', '--json'], { env: fEnv })).stdout)
  t.same((await status()).checkpoints, { 'old-node': 2, rules: 17 }, 'status lists every checkpoint')
  t.match((await runCommand(streamCommand, ['status'], { env: fEnv })).stdout, /\ncheckpoints: old-node at 2, rules at 17\n$/)

  const cases: Array<{ description: string, args: string[], code: number, stdout?: string, stderr?: RegExp, left: Record<string, number> }> = [
    { description: 'no --consumer', args: [], code: 2, stderr: /^threatfeed: stream forget needs --consumer NAME; stream status lists the checkpoints\n$/, left: { 'old-node': 2, rules: 17 } },
    { description: 'an empty name', args: ['--consumer', ''], code: 2, stderr: /needs --consumer NAME/, left: { 'old-node': 2, rules: 17 } },
    { description: 'an unknown name', args: ['--consumer', 'old-nod'], code: 1, stderr: /^threatfeed: no checkpoint named "old-nod"; stored: "old-node", "rules"\n$/, left: { 'old-node': 2, rules: 17 } },
    { description: 'the server\'s own without --force', args: ['--consumer', 'rules'], code: 2, stderr: /^threatfeed: "rules" is the server's own consumer: without its checkpoint it re-applies every record kept; add --force to forget it anyway\n$/, left: { 'old-node': 2, rules: 17 } },
    { description: 'a stale consumer', args: ['--consumer', 'old-node'], code: 0, stdout: 'forgot the checkpoint of "old-node"\n', left: { rules: 17 } },
    { description: 'the same again', args: ['--consumer', 'old-node'], code: 1, stderr: /no checkpoint named "old-node"; stored: "rules"\n$/, left: { rules: 17 } },
  ]
  for (const c of cases) {
    const r = await runCommand(streamCommand, ['forget', ...c.args], { env: fEnv })
    t.equal(r.code, c.code, `${c.description}: exit code`)
    if (c.stdout !== undefined) t.equal(r.stdout, c.stdout, `${c.description}: stdout`)
    if (c.stderr !== undefined) {
      t.match(r.stderr, c.stderr, `${c.description}: stderr`)
      t.equal(r.stdout, '', `${c.description}: nothing on stdout`)
    }
    t.same((await status()).checkpoints, c.left, `${c.description}: checkpoints left`)
  }

  const s2 = await openStore({ kind: 'embedded', dataDir: fDir })
  t.same(await s2.stream.trim(T + 1, 100), { records: 15, more: false }, 'now the trim goes up to the append holding rules\' checkpoint')
  await s2.close()
  t.equal((await status()).retained.first, 16)

  const forced = await runCommand(streamCommand, ['forget', '--consumer', 'rules', '--force'], { env: fEnv })
  t.equal(forced.code, 0, forced.stderr)
  t.same((await status()).checkpoints, {}, '--force forgets the server\'s own')
  t.equal((await runCommand(streamCommand, ['status'], { env: fEnv })).stdout.split('\n')[1], 'checkpoints: none')
})

t.test('usage errors', async (t) => {
  const cases: Array<{ args: string[], stderr: RegExp }> = [
    { args: ['tail', '--from=-1'], stderr: /--from must be a whole number from 0 to/ },
    { args: ['tail', '--from', 'x'], stderr: /--from must be a whole number/ },
    { args: ['tail', '--limit', '0'], stderr: /--limit must be a whole number from 1 to 100000, got "0"/ },
    { args: ['head'], stderr: /unknown stream command "head"/ },
  ]
  for (const c of cases) {
    const r = await runCommand(streamCommand, c.args, { env })
    t.equal(r.code, 2, c.args.join(' '))
    t.match(r.stderr, c.stderr)
  }
  t.match((await runCommand(streamCommand, [], { env })).stdout, /Usage: threatfeed stream <tail\|status\|forget>/)
})

t.test('tail: a v1 batch stored whole shows as one record per entry, each its text, from any seq inside it', async (t) => {
  const wholeDir = mkdtempSync(join(tmpdir(), 'tf-stream-cli-whole-'))
  t.teardown(() => rmSync(wholeDir, { recursive: true, force: true }))
  const texts = ['{ "type":"access_rules", "action":"block", "ip":"192.0.2.1" }', '{"type":"access_rules","action":"block","ip":"192.0.2.2","description":"caf\\u00e9 ] ,"}', '{"type":"access_rules","action":"unblock","ip":"192.0.2.3"}']
  const s = await openStore({ kind: 'embedded', dataDir: wholeDir })
  await s.stream.append({ workspaceId: 'w3', acceptedAt: T, body: Buffer.from(`[\n  ${texts.join(',\n  ')}\n]`), count: texts.length })
  await s.close()
  const tail = async (args: string[]) => {
    const r = await runCommand(streamCommand, ['tail', ...args, '--json'], { env: { THREATFEED_DATA_DIR: wholeDir } })
    t.equal(r.code, 0, r.stderr)
    return JSON.parse(r.stdout) as unknown
  }
  const record = (i: number) => ({ seq: i + 1, workspace: 'w3', acceptedAt: '2026-01-02T03:04:05.000Z', payload: texts[i] })
  t.same(await tail(['--from', '1']), [record(0), record(1), record(2)])
  t.same(await tail(['--from', '2', '--limit', '1']), [record(1)], 'from inside the batch, up to a limit')
  t.same(await tail(['--limit', '2']), [record(1), record(2)], 'the last records')
})
