/**
 * The feed benches that need new versions of the feed (bench/deltas, bench/fleet): a
 * `threatfeed serve` on the seeded store, a plain HTTP GET against it, and the churn that makes
 * each version — 1 % of the feed differing, about half removed and half added (hosts two apart,
 * so nothing coalesces and the feed keeps its size), written to the store as another process
 * would, which the server picks up by polling it.
 */
import type { ChildProcess } from 'node:child_process'
import { request } from 'node:http'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import type { RuleOp } from '../../src/store/batch-types.js'
import { spawnPinned } from './processes.js'
import { repoDir } from './report.js'
import { benchServerEnv } from './server-env.js'

/**
 * `threatfeed serve` on `dataDir`, pinned to `cores` with open files raised to the hard limit,
 * rebuilding its feeds within a second of a change; resolves once it logs `listening`.
 */
export async function startFeedServer (dataDir: string, cores: string, env: Record<string, string> = {}): Promise<{ server: ChildProcess, port: number }> {
  const server = spawnPinned(cores, [process.execPath, '--import=tsx', join(repoDir, 'src', 'cli', 'run.ts'), 'serve'], {
    ...process.env,
    ...benchServerEnv(dataDir),
    THREATFEED_LOG_LEVEL: 'info',
    THREATFEED_FEED_REBUILD_MS: '1000',
    THREATFEED_POLL_MS: '200',
    ...env,
  })
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error('no "listening" line within 180 s')) }, 180_000)
    server.once('exit', (code) => { clearTimeout(timer); reject(new Error(`the server exited with ${code} before listening`)) })
    createInterface({ input: server.stdout! }).on('line', (line) => {
      try {
        const rec = JSON.parse(line) as { msg?: string, port?: number }
        if (rec.msg === 'listening' && typeof rec.port === 'number') { clearTimeout(timer); resolve(rec.port) }
      } catch {
        // Not a log line.
      }
    })
  })
  return { server, port }
}

export interface Answer { status: number, headers: Record<string, string | string[] | undefined>, bytes: number }

/** A GET (or HEAD) on 127.0.0.1:`port` with the key's Authorization; the body counted, not kept. */
export function feedGetter (port: number, key: string): (path: string, headers?: Record<string, string>, method?: 'GET' | 'HEAD') => Promise<Answer> {
  return (path, headers = {}, method = 'GET') => new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers: { authorization: `Bearer ${key}`, ...headers } }, (res) => {
      let bytes = 0
      res.on('data', (c: Buffer) => { bytes += c.length })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes }) })
    })
    req.on('error', reject)
    req.end()
  })
}

/**
 * Asks `path` (HEAD, gzip: the tag without the body) until its ETag is a served one other than
 * `previous`, every `everyMs`, at most `tries` times; returns it (or the last seen, for the caller
 * to judge).
 */
export async function nextTag (get: ReturnType<typeof feedGetter>, path: string, previous: string, everyMs = 100, tries = 600): Promise<string> {
  let tag = previous
  for (let i = 0; i < tries; i++) {
    const r = await get(path, { 'accept-encoding': 'gzip' }, 'HEAD')
    tag = String(r.headers.etag)
    if (r.status === 200 && tag.startsWith('"') && tag !== previous) return tag
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
  return tag
}

const ipOf = (a: number): string => `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}/32`

/**
 * The versions of the feed seeded by seedFeedStore(dataDir, entries): each call of `nextOps`
 * removes ⌈1 %/2⌉ of its networks at random and adds as many new ones less one, so 1 % differ.
 */
export class FeedChurn {
  readonly #workspaceId: string
  readonly #random: () => number
  readonly #live: number[]
  readonly churn: number
  readonly removed: number
  #fresh = 0x0b000000
  #seq: number

  /** `random` is a makeRandom(seed) of bench/lib/random.ts, shared with the caller if it wants the same sequence. */
  constructor (workspaceId: string, entries: number, random: () => number) {
    this.#workspaceId = workspaceId
    this.#random = random
    this.#live = Array.from({ length: entries }, (_, i) => 0x0a000000 + i * 2)
    this.churn = Math.round(entries / 100)
    this.removed = Math.ceil(this.churn / 2)
    this.#seq = entries + 1
  }

  /** The next version's writes, for one Store.applyRuleBatch. */
  nextOps (): RuleOp[] {
    const ops: RuleOp[] = []
    const live = this.#live
    for (let k = 0; k < this.churn; k++) {
      if (k < this.removed) {
        const at = this.#random() % live.length
        ops.push({ op: 'deleteAccessByTarget', workspaceId: this.#workspaceId, target: { type: 'ip', value: ipOf(live[at]!) } })
        live[at] = live[live.length - 1]!
        live.pop()
        continue
      }
      live.push(this.#fresh)
      ops.push({ op: 'upsertAccessRule', input: { kind: 'access_rule', workspaceId: this.#workspaceId, ruleRef: null, labels: {}, reason: null, expiresAt: null, seq: this.#seq++, target: { type: 'ip', value: ipOf(this.#fresh) }, action: 'block', name: null, confidence: null, severity: null } })
      this.#fresh += 2
    }
    return ops
  }
}
