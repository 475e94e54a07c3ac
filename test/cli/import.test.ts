import t from 'tap'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { PassThrough, Readable } from 'node:stream'
import { importCommand, signalUrl } from '../../src/cli/import.js'
import type { AccessRule } from '../../src/store/types.js'
import { runCommand } from '../helpers/cli.js'
import { startTestServer } from '../helpers/server.js'

const srv = await startTestServer()
t.teardown(() => srv.close())
const dir = mkdtempSync(join(tmpdir(), 'tf-import-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

const v1 = (i: number) => `{"type":"access_rules","action":"block","ip":"10.9.${i >> 8 & 255}.${i & 255}"}`

t.test('NDJSON, v1: summary, exit status, failed file, rules applied', async (t) => {
  const file = join(dir, 'v1.ndjson')
  const failedFile = join(dir, 'v1.failed.ndjson')
  const lines = Array.from({ length: 2500 }, (_, i) => v1(i))
  lines[7] = '{"type":"access_rules","action":"block","country":"XX"}'
  lines[1500] = '{"type":"access_rules",'
  writeFileSync(file, lines.join('\n') + '\n')
  const r = await runCommand(importCommand, [file, '--url', srv.url, '--key', srv.keys.all, '--failed', failedFile, '--json'])
  t.equal(r.code, 1, 'some entries failed')
  const summary = JSON.parse(r.stdout) as Record<string, unknown>
  t.match(summary, { entries: 2500, accepted: 2498, failed: 2, batches: 3, retries: 0, stopped: null })
  t.same(readFileSync(failedFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as unknown).sort((a, b) => (a as { index: number }).index - (b as { index: number }).index), [
    { index: 7, reason: 'country: must be an ISO-3166 alpha-2 code', entry: { type: 'access_rules', action: 'block', country: 'XX' } },
    { index: 1500, reason: 'not valid JSON', text: '{"type":"access_rules",' },
  ])
  await srv.consumer.waitFor(await srv.store.stream.head(), 2000)
  const stored = ((await srv.store.rules.list(srv.workspace.id, 'access_rule')) as AccessRule[]).filter((x) => x.target.value.startsWith('10.9.'))
  t.equal(stored.length, 2498)
})

t.test('JSON array, v2, all accepted: exit 0 and a text summary', async (t) => {
  const file = join(dir, 'v2.json')
  writeFileSync(file, JSON.stringify(Array.from({ length: 1200 }, (_, i) => ({ kind: 'waf_rule', op: 'upsert', rule_ref: `imp-${i}`, rule: { type: 'custom', expression: `http.request.uri.path eq "/p${i}"`, action: 'block' } })), null, 1))
  const r = await runCommand(importCommand, [file, '--url', `${srv.url}/`, '--key', srv.keys.all, '--api', 'v2', '--concurrency', '2'])
  t.equal(r.code, 0, r.stderr)
  t.match(r.stdout, new RegExp(`^imported ${file.replace(/[.]/g, '\\.')}: 1200 entries, 1200 accepted, 0 failed, 2 batches, 0 retries in \\d+\\.\\d s \\(\\d+ entries/s\\)\\n$`))
  await srv.consumer.waitFor(await srv.store.stream.head(), 2000)
  t.equal((await srv.store.rules.list(srv.workspace.id, 'waf_rule')).filter((x) => x.ruleRef!.startsWith('imp-')).length, 1200)
})

t.test('a bad key stops the import at once', async (t) => {
  const file = join(dir, 'bad-key.ndjson')
  writeFileSync(file, Array.from({ length: 3000 }, (_, i) => v1(i)).join('\n'))
  const r = await runCommand(importCommand, [file, '--url', srv.url, '--key', 'tf_wrong', '--json', '--concurrency', '1'])
  t.equal(r.code, 1)
  t.match(JSON.parse(r.stdout), { entries: 3000, accepted: 0, failed: 3000, batches: 1, stopped: 'HTTP 401: invalid or missing API key' })
  t.equal(r.stderr, 'threatfeed: import stopped: HTTP 401: invalid or missing API key\n')
})

t.test('stdin, and the key from the environment', async (t) => {
  const r = await runCommand(importCommand, ['-', '--url', srv.url, '--json'], { stdin: `${v1(1)}\n${v1(2)}\n`, env: { THREATFEED_API_KEY: srv.keys.write } })
  t.equal(r.code, 0, r.stderr)
  t.match(JSON.parse(r.stdout), { entries: 2, accepted: 2 })
})

t.test('a progress bar on a terminal', async (t) => {
  const file = join(dir, 'tty.ndjson')
  writeFileSync(file, Array.from({ length: 1500 }, (_, i) => v1(i)).join('\n'))
  const stderr = new PassThrough()
  const chunks: Buffer[] = []
  stderr.on('data', (c: Buffer) => chunks.push(c))
  const stdout = new PassThrough()
  stdout.resume()
  const code = await importCommand.run([file, '--url', srv.url, '--key', srv.keys.all], { stdin: Readable.from([]), stdout, stderr, env: {}, isTTY: true })
  t.equal(code, 0)
  const drawn = Buffer.concat(chunks).toString()
  t.match(drawn, /100% \| 1500\/1500 entries \| \d+ entries\/s \| 0 failed \| ETA 0s/)
})

/** A terminal stand-in: what cli-progress draws on it, split into the frames it drew. */
function fakeTerminal (): { stream: PassThrough, frames: () => string[] } {
  const stream = Object.assign(new PassThrough(), { isTTY: true, columns: 200 })
  const chunks: Buffer[] = []
  stream.on('data', (c: Buffer) => chunks.push(c))
  // eslint-disable-next-line no-control-regex -- cursor movement and line clearing between frames
  const frames = () => Buffer.concat(chunks).toString().split(/\x1b\[[0-9;?]*[A-Za-z]|[\r\n]/).filter((f) => f.includes(' entries'))
  return { stream, frames }
}

t.test('the progress bar follows acknowledged entries, never shows NF or LL, and counts without a total from stdin', async (t) => {
  // A pipeline endpoint that answers slowly: each batch waits before the real server sees it.
  const slow = createServer((req, res) => {
    const body: Buffer[] = []
    req.on('data', (c: Buffer) => body.push(c))
    req.on('end', () => {
      setTimeout(() => {
        fetch(`${srv.url}${req.url}`, { method: 'POST', headers: { authorization: req.headers.authorization!, 'content-type': 'application/json' }, body: Buffer.concat(body) })
          .then(async (r) => { res.writeHead(r.status, { 'content-type': 'application/json' }).end(Buffer.from(await r.arrayBuffer())) })
          .catch((e: Error) => { res.writeHead(502).end(e.message) })
      }, 700)
    })
  })
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { slow.close() })
  const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`

  const file = join(dir, 'slow.ndjson')
  writeFileSync(file, Array.from({ length: 2500 }, (_, i) => v1(i)).join('\n'))
  const term = fakeTerminal()
  const stdout = new PassThrough()
  stdout.resume()
  const code = await importCommand.run([file, '--url', url, '--key', srv.keys.all, '--concurrency', '1'], { stdin: Readable.from([]), stdout, stderr: term.stream, env: {}, isTTY: true })
  t.equal(code, 0)
  const frames = term.frames()
  t.ok(frames.length >= 3, `several frames drawn (${frames.length})`)
  t.notMatch(frames.join('\n'), /NF|LL|NaN|Infinity/, 'no NFs / LLs')
  const parsed = frames.map((f) => {
    const m = /(\d+)% \| (\d+)\/(~?)(\d+|\?) entries \| \d+ entries\/s \| (\d+) failed \| ETA (\S+)/.exec(f)
    t.ok(m, `a frame of the bar: ${JSON.stringify(f)}`)
    return m === null ? null : { pct: Number(m[1]), done: Number(m[2]), estimated: m[3] === '~', total: m[4] === '?' ? 0 : Number(m[4]), eta: m[6]! }
  }).filter((x) => x !== null)
  for (const f of parsed) {
    t.equal(f.pct, f.total === 0 ? 0 : Math.floor(100 * f.done / f.total), `${f.pct}% is ${f.done} of ${f.total} acknowledged`)
    if (f.done === 0) t.equal(f.eta, '--', 'no ETA before the first answer')
    else t.match(f.eta, /^(\d+s|\d+m\d\ds|\d+h\d\dm)$/)
  }
  t.ok(parsed.some((f) => f.done === 0 && f.total >= 2499 && f.pct === 0), 'the whole file read (its last line is counted at the end), nothing acknowledged yet: 0 %, not 100 %')
  t.ok(parsed.some((f) => f.done === 1000 && f.pct === 40), 'one batch of 2,500 acknowledged: 40 %')
  t.match(parsed.at(-1), { pct: 100, done: 2500, total: 2500, estimated: false })

  const piped = fakeTerminal()
  const fromStdin = await importCommand.run(['-', '--url', srv.url, '--key', srv.keys.all], { stdin: Readable.from([Array.from({ length: 1200 }, (_, i) => v1(i)).join('\n')]), stdout, stderr: piped.stream, env: {}, isTTY: true })
  t.equal(fromStdin, 0)
  t.match(piped.frames().at(-1), /^1200 entries acknowledged \| \d+ entries\/s \| 0 failed$/, 'stdin: a count, no percentage')
  t.notMatch(piped.frames().join('\n'), /%|ETA/)
})

t.test('usage errors and unreadable files', async (t) => {
  const cases: Array<{ args: string[], code: number, stderr: RegExp }> = [
    { args: ['--url', srv.url, '--key', 'k'], code: 2, stderr: /expected exactly one FILE/ },
    { args: ['f', '--key', 'k'], code: 2, stderr: /--url is required/ },
    { args: ['f', '--url', srv.url], code: 2, stderr: /--key is required \(or set THREATFEED_API_KEY\)/ },
    { args: ['f', '--url', 'ftp://x', '--key', 'k'], code: 2, stderr: /--url must be an http\(s\) URL, got "ftp:\/\/x"/ },
    { args: ['f', '--url', srv.url, '--key', 'k', '--api', 'v3'], code: 2, stderr: /--api must be v1 or v2, got "v3"/ },
    { args: ['f', '--url', srv.url, '--key', 'k', '--concurrency', '0'], code: 2, stderr: /--concurrency must be a whole number from 1 to 64, got "0"/ },
    { args: [join(dir, 'missing.json'), '--url', srv.url, '--key', 'k'], code: 1, stderr: /cannot read .*missing\.json/ },
  ]
  for (const c of cases) {
    const r = await runCommand(importCommand, c.args)
    t.equal(r.code, c.code, c.args.join(' '))
    t.match(r.stderr, c.stderr)
  }
  const broken = join(dir, 'broken.json')
  writeFileSync(broken, '[{"a":1} {"b":2}]')
  const r = await runCommand(importCommand, [broken, '--url', srv.url, '--key', srv.keys.all])
  t.equal(r.code, 1)
  t.match(r.stderr, /broken\.json: not a JSON array: expected "," or "\]" at offset 9/)
  t.equal(signalUrl('https://h:1/base/', 'v2'), 'https://h:1/base/v2/signal')
  t.match((await runCommand(importCommand, ['--help'])).stdout, /Usage: threatfeed import FILE --url URL \[--key KEY\]/)
})
