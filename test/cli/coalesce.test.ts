import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { closeSync, openSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { coalesceCommand } from '../../src/cli/coalesce.js'
import { runCommand } from '../helpers/cli.js'

const run = (args: string[], stdin?: string | Buffer) => runCommand(coalesceCommand, args, { stdin })

t.test('coalesces stdin into sorted CIDRs, IPv4 first', async (t) => {
  const input = [
    '# threat list',
    '2001:db8::1',
    '10.0.0.128/25',
    '',
    '10.0.0.0/25   # first half',
    '192.0.2.1',
    '192.0.2.0-192.0.2.0',
    '::ffff:198.51.100.7',
    '2001:DB8:0:0:0:0:0:2/127\r',
    '',
  ].join('\n')
  const r = await run([], input)
  t.same(r, {
    code: 0,
    stdout: '10.0.0.0/24\n192.0.2.0/31\n198.51.100.7/32\n2001:db8::1/128\n2001:db8::2/127\n',
    stderr: '',
  })
})

t.test('bad lines are reported with their line numbers; nothing is written; exit 1', async (t) => {
  const r = await run([], '10.0.0.1\n010.0.0.1\n\n1.2.3.4/33\nfe80::1%eth0\n10.0.0.9-10.0.0.1\n')
  t.equal(r.code, 1)
  t.equal(r.stdout, '')
  t.equal(r.stderr, [
    'threatfeed: stdin:2: IPv4 octets with leading zeros are not allowed: "010.0.0.1"',
    'threatfeed: stdin:4: prefix length 33 is out of range for IPv4: "1.2.3.4/33"',
    'threatfeed: stdin:5: zone ids are not allowed: "fe80::1%eth0"',
    'threatfeed: stdin:6: range start is after its end: "10.0.0.9-10.0.0.1"',
    'threatfeed: 4 invalid lines; nothing written (--skip-invalid coalesces the valid ones)',
    '',
  ].join('\n'))
})

t.test('--skip-invalid still reports, then prints the valid ones and exits 0', async (t) => {
  const r = await run(['--skip-invalid'], '10.0.0.1\nnope\n10.0.0.0\n')
  t.same(r, {
    code: 0,
    stdout: '10.0.0.0/31\n',
    stderr: 'threatfeed: stdin:2: not an IP address: "nope"\nthreatfeed: skipped 1 invalid line\n',
  })
})

t.test('non-ASCII lines are shown as UTF-8', async (t) => {
  const r = await run([], Buffer.from('10.0.0.1\u00a0\n'))
  t.equal(r.stderr.split('\n')[0], 'threatfeed: stdin:1: whitespace and control characters are not allowed: "10.0.0.1\u00a0"')
})

t.test('past 100 invalid lines only the count is reported', async (t) => {
  const r = await run(['--skip-invalid'], 'x\n'.repeat(150) + '10.0.0.1\n')
  const lines = r.stderr.split('\n')
  t.equal(lines.filter((l) => l.includes(': not an IP address:')).length, 100)
  t.ok(lines.includes('threatfeed: … and 50 more invalid lines'))
  t.equal(r.stdout, '10.0.0.1/32\n')
})

t.test('--family', async (t) => {
  const input = '10.0.0.1\n2001:db8::1\n'
  t.same(await run(['--family', 'v4'], input), { code: 0, stdout: '10.0.0.1/32\n', stderr: '' })
  t.same(await run(['--family', 'v6'], input), { code: 0, stdout: '2001:db8::1/128\n', stderr: '' })
  t.same(await run(['--family', 'both'], input), { code: 0, stdout: '10.0.0.1/32\n2001:db8::1/128\n', stderr: '' })
  const bad = await run(['--family', 'v5'], input)
  t.equal(bad.code, 2)
  t.equal(bad.stderr, 'threatfeed: --family must be v4, v6 or both\n')
})

t.test('--subtract FILE carves the listed addresses out', async (t) => {
  const dir = t.testdir({})
  const allow = join(dir, 'allow.txt')
  writeFileSync(allow, '# never block\n10.0.0.1\n2001:db8::/33\n')
  const r = await run(['--subtract', allow], '10.0.0.0/30\n2001:db8::/32\n')
  t.same(r, { code: 0, stdout: '10.0.0.0/32\n10.0.0.2/31\n2001:db8:8000::/33\n', stderr: '' })
})

t.test('--subtract: bad lines are reported under the file name', async (t) => {
  const dir = t.testdir({})
  const allow = join(dir, 'allow.txt')
  writeFileSync(allow, '10.0.0.1\n10.0.0.0/40\n')
  const r = await run(['--subtract', allow], '10.0.0.0/30\n')
  t.equal(r.code, 1)
  t.equal(r.stdout, '')
  t.match(r.stderr, `threatfeed: ${allow}:2: prefix length 40 is out of range for IPv4: "10.0.0.0/40"\n`)
})

t.test('--subtract: a missing file is an error', async (t) => {
  const r = await run(['--subtract', '/nonexistent/allow.txt'], '10.0.0.1\n')
  t.equal(r.code, 1)
  t.match(r.stderr, /^threatfeed: cannot read --subtract file \/nonexistent\/allow\.txt: ENOENT/)
})

t.test('empty input, comments only, and everything carved away give empty output', async (t) => {
  t.same(await run([], ''), { code: 0, stdout: '', stderr: '' })
  t.same(await run([], '# nothing\n\n   \n'), { code: 0, stdout: '', stderr: '' })
  t.same(await run(['--family', 'v6'], '10.0.0.1\n'), { code: 0, stdout: '', stderr: '' })
})

t.test('--json prints one document', async (t) => {
  const ok = await run(['--json'], '10.0.0.0/25\n10.0.0.128/25\n::1\n')
  t.equal(ok.code, 0)
  t.same(JSON.parse(ok.stdout), { ok: true, count: 2, networks: ['10.0.0.0/24', '::1/128'], invalid: [], invalidCount: 0 })
  const bad = await run(['--json'], '10.0.0.1\nbad\n')
  t.equal(bad.code, 1)
  t.same(JSON.parse(bad.stdout), {
    ok: false,
    count: 0,
    networks: [],
    invalid: [{ source: 'stdin', line: 2, text: 'bad', reason: 'not an IP address' }],
    invalidCount: 1,
  })
  const empty = await run(['--json'], '')
  t.same(JSON.parse(empty.stdout), { ok: true, count: 0, networks: [], invalid: [], invalidCount: 0 })
})

t.test('--help and unknown options', async (t) => {
  const help = await run(['--help'])
  t.equal(help.code, 0)
  t.match(help.stdout, /^Usage: threatfeed coalesce/)
  const unknown = await run(['--frobnicate'])
  t.equal(unknown.code, 2)
  t.match(unknown.stderr, /frobnicate/)
  t.equal(coalesceCommand.name, 'coalesce')
})

t.test('the general-purpose command has no /8 or /12 floor', async (t) => {
  t.same(await run([], '0.0.0.0/0\n::/0\n'), { code: 0, stdout: '0.0.0.0/0\n::/0\n', stderr: '' })
})

t.test('threatfeed coalesce as a process: stdin from a pipe or a file, exit code', async (t) => {
  const root = join(dirname(fileURLToPath(import.meta.url)), '../..')
  const argv = ['--import=tsx', join(root, 'src/cli/run.ts'), 'coalesce']
  const piped = spawnSync(process.execPath, [...argv, '--family', 'v4'], { input: '10.0.0.1\n10.0.0.0\n::1\n', encoding: 'utf8' })
  t.same([piped.status, piped.stdout, piped.stderr], [0, '10.0.0.0/31\n', ''])
  const file = join(t.testdir({ 'in.txt': '10.0.0.0/25\n10.0.0.128/25\nbad\n' }), 'in.txt')
  const fd = openSync(file, 'r')
  try {
    const fromFile = spawnSync(process.execPath, argv, { stdio: [fd, 'pipe', 'pipe'], encoding: 'utf8' })
    t.same([fromFile.status, fromFile.stdout], [1, ''])
    t.match(fromFile.stderr, 'threatfeed: stdin:3: not an IP address: "bad"')
  } finally {
    closeSync(fd)
  }
})

t.test('threatfeed coalesce exits quietly with 0 when its reader goes away (… | head)', async (t) => {
  const root = join(dirname(fileURLToPath(import.meta.url)), '../..')
  // Every other address of 10.0.0.0/16: 32768 host routes, ~500 KB, far more than a pipe buffer holds.
  const input = Array.from({ length: 32768 }, (_, i) => `10.${i >> 15}.${(i >> 7) & 255}.${(i & 127) * 2}`).join('\n')
  const child = spawn(process.execPath, ['--import=tsx', join(root, 'src/cli/run.ts'), 'coalesce'], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  child.stdout.once('data', () => child.stdout.destroy())
  child.stdin.end(input)
  const code = await new Promise((resolve) => child.on('close', resolve))
  t.same([code, stderr], [0, ''])
})
