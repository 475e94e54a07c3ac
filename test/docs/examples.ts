/**
 * The HTTP examples of a docs/ page, run against a real server (src/main.ts's startServer on a
 * fresh data directory): each ```http block that starts with a method is a request, and the next
 * ```http block, starting with `HTTP/1.1`, is its answer. The answers are generated from the real
 * ones (`npm run docs:examples` rewrites them) and test/docs/examples.test.ts checks that the page
 * still equals the real answers, modulo ids and times.
 *
 * In a request, `$KEY` is a key with signals:write and feeds:read, `$RULES_KEY` one with feeds:read
 * and rules:read, `$ADMIN_KEY` one with admin, `$BASIC` the Basic credentials `api:$KEY`,
 * `$WORKSPACE` the workspace's id, `$ETAG` the ETag of the last answer that had one and `$ID` the
 * top-level `id` of the last JSON answer that had one. An answer block shows the status line, the headers the
 * page chose to show (a value `…` stands for any value), and the body.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer } from '../../src/main.js'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from '../helpers/server.js'

export interface Example {
  /** Offsets of the answer block's text (between the fences) in the page, or null when there is none. */
  readonly answer: { start: number, end: number, text: string } | null
  readonly request: string
  /** Offset in the page just after the request block's closing fence. */
  readonly requestEnd: number
}

/** The request/answer pairs of a page, in order. */
export function examplesOf (page: string): Example[] {
  const blocks = [...page.matchAll(/```http\n([\s\S]*?)```/g)].map((m) => ({ start: m.index + '```http\n'.length, end: m.index + '```http\n'.length + m[1]!.length, text: m[1]! }))
  const out: Example[] = []
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i]!
    if (!/^(GET|HEAD|POST|PUT|PATCH|DELETE) /.test(b.text)) continue
    const next = blocks[i + 1]
    const answer = next !== undefined && next.text.startsWith('HTTP/1.1 ') ? next : null
    out.push({ request: b.text, requestEnd: b.end + '```'.length, answer })
  }
  return out
}

const REASONS: Record<number, string> = { 200: 'OK', 201: 'Created', 206: 'Partial Content', 304: 'Not Modified', 400: 'Bad Request', 401: 'Unauthorized', 402: 'Payment Required', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 409: 'Conflict', 413: 'Content Too Large', 429: 'Too Many Requests', 500: 'Internal Server Error', 503: 'Service Unavailable' }

export interface Answer { status: number, headers: Headers, body: string }

/** A server with one workspace and the keys the examples name; `stop` ends it and removes its data. */
export async function exampleServer (env: Record<string, string> = {}): Promise<{ vars: Record<string, string>, base: string, stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-doc-examples-'))
  const dataDir = join(dir, 'data')
  const store = await openStore({ kind: 'embedded', dataDir })
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  const keys = { KEY: generateApiKey(), RULES_KEY: generateApiKey(), ADMIN_KEY: generateApiKey() }
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(keys.KEY), scopes: ['signals:write', 'feeds:read'] })
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(keys.RULES_KEY), scopes: ['feeds:read', 'rules:read'] })
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(keys.ADMIN_KEY), scopes: ['admin'] })
  await store.close()
  const config = loadConfig({
    HOST: '127.0.0.1',
    PORT: '0',
    THREATFEED_DATA_DIR: dataDir,
    THREATFEED_LOG_LEVEL: 'silent',
    THREATFEED_POLL_MS: '100',
    THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
    THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
    THREATFEED_HTTP_THREADS: '1',
    ...env,
  })
  const server = await startServer(config, createLogger(config.logLevel))
  return {
    vars: { ...keys, WORKSPACE: ws.id, BASIC: Buffer.from(`api:${keys.KEY}`).toString('base64') },
    base: `http://127.0.0.1:${server.port}`,
    stop: async () => { await server.stop(); rmSync(dir, { recursive: true, force: true }) },
  }
}

/** Sends one request block; `vars` gains ETAG from an answer that has one. */
export async function send (base: string, request: string, vars: Record<string, string>): Promise<Answer> {
  const text = request.replace(/\$([A-Z_]+)/g, (whole, name: string) => vars[name] ?? whole)
  const split = text.indexOf('\n\n')
  const head = (split === -1 ? text : text.slice(0, split)).split('\n').filter((l) => l !== '')
  const body = split === -1 ? undefined : text.slice(split + 2).replace(/\n$/, '')
  const [method, target] = head[0]!.split(' ') as [string, string]
  const headers = new Headers()
  for (const line of head.slice(1)) headers.append(line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim())
  // fetch asks for gzip and unpacks it unasked: send what the page's request sends, nothing more.
  if (!headers.has('accept-encoding')) headers.set('accept-encoding', 'identity')
  const r = await fetch(base + target, { method, headers, body, redirect: 'manual' })
  const answer = { status: r.status, headers: r.headers, body: await r.text() }
  const etag = r.headers.get('etag')
  if (etag !== null) vars.ETAG = etag
  if ((r.headers.get('content-type') ?? '').startsWith('application/json')) {
    const id = (JSON.parse(answer.body) as { id?: unknown }).id
    if (typeof id === 'string') vars.ID = id
  }
  return answer
}

/** The answer as a page shows it: status line, the headers named in `shown` (in that order), body. */
export function render (a: Answer, shown: readonly string[]): string {
  const lines = [`HTTP/1.1 ${a.status} ${REASONS[a.status] ?? ''}`.trimEnd()]
  for (const name of shown) {
    const v = a.headers.get(name)
    if (v !== null) lines.push(`${name}: ${v}`)
  }
  let body = a.body
  if ((a.headers.get('content-type') ?? '').startsWith('application/json') && body !== '') {
    body = pretty(JSON.parse(body), 0, 0)
  }
  return lines.join('\n') + '\n' + (body === '' ? '' : '\n' + body.replace(/\n$/, '') + '\n')
}

/** JSON on one line where it fits in 100 columns (`lead`: what precedes it on its line), else one member a line. */
function pretty (v: unknown, indent: number, lead: number): string {
  const compact = JSON.stringify(v)
  if (lead + compact.length <= 100 || v === null || typeof v !== 'object') return compact
  const pad = ' '.repeat(indent + 2)
  const items = Array.isArray(v)
    ? v.map((x) => pad + pretty(x, indent + 2, indent + 2))
    : Object.entries(v).map(([k, x]) => `${pad}${JSON.stringify(k)}: ${pretty(x, indent + 2, indent + 6 + k.length)}`)
  const [open, close] = Array.isArray(v) ? ['[', ']'] : ['{', '}']
  return `${open}\n${items.join(',\n')}\n${' '.repeat(indent)}${close}`
}

/** The header names an answer block shows, in order. */
export function shownHeaders (answer: string): string[] {
  const head = answer.split('\n\n')[0]!.split('\n').slice(1)
  return head.map((l) => l.slice(0, l.indexOf(':'))).filter((n) => n !== '')
}

/**
 * What may differ between two runs: ids, keys, times, and the digests derived from times (an
 * ETag or a dialect_a body carries the build time). `…` in a shown header matches any value.
 */
export function normalise (text: string): string {
  return text
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
    .replace(/tf_[A-Za-z0-9_-]{43}/g, '<key>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
    .replace(/(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT/g, '<date>')
    .replace(/^([A-Za-z-]+): …$/gm, '$1: <any>')
    .replace(/^(etag: "[^"]*\.)[A-Za-z0-9_-]+"/gim, '$1<digest>"')
    .replace(/"(digest|accepted|published_digest)": ?"[0-9a-f]{32}"/g, '"$1":"<digest>"')
}

/** Runs every example of a page in order on a fresh server; the rendered answer of each. */
export async function runPage (page: string, env: Record<string, string> = {}): Promise<Array<{ example: Example, rendered: string }>> {
  const s = await exampleServer(env)
  try {
    const out: Array<{ example: Example, rendered: string }> = []
    for (const example of examplesOf(page)) {
      const a = await send(s.base, example.request, s.vars)
      const shown = example.answer === null ? ['content-type'] : shownHeaders(example.answer.text)
      let rendered = render(a, shown)
      // Keep the page's `…` where it chose to hide a value.
      if (example.answer !== null) {
        for (const line of example.answer.text.split('\n\n')[0]!.split('\n')) {
          if (line.endsWith(': …')) rendered = rendered.replace(new RegExp(`^${line.slice(0, -3)}: .*$`, 'm'), line)
        }
      }
      out.push({ example, rendered })
    }
    return out
  } finally {
    await s.stop()
  }
}

/** The page with every answer block that differs (beyond ids and times) from the real answer replaced by it, and inserted where missing. */
export function rewrite (page: string, results: ReadonlyArray<{ example: Example, rendered: string }>): string {
  let out = page
  for (const { example, rendered } of [...results].reverse()) {
    if (example.answer !== null) {
      if (normalise(example.answer.text) === normalise(rendered)) continue
      out = out.slice(0, example.answer.start) + rendered + out.slice(example.answer.end)
    } else {
      const at = example.requestEnd
      out = out.slice(0, at) + '\n\n```http\n' + rendered + '```' + out.slice(at)
    }
  }
  return out
}
