/**
 * `threatfeed import`: the bulk loader. Streams a JSON array or NDJSON file of any size into the
 * signal API in 1000-entry batches with bounded concurrency (src/ingest/bulk/), with a progress
 * bar on a terminal and a summary at the end.
 */
import { createReadStream, createWriteStream, statSync, type WriteStream } from 'node:fs'
import { once } from 'node:events'
import type { Readable } from 'node:stream'
import cliProgress from 'cli-progress'
import { CliError, parseOptions, writeHelp, writeJson, type CliIo, type Command } from './command.js'
import { loadEntries, type LoadProgress, type LoadSummary } from '../ingest/bulk/load.js'
import { readEntries, SourceError, type SourceEntry } from '../ingest/bulk/read-entries.js'
import { DEFAULT_RETRY } from '../ingest/bulk/send-batch.js'

const help = `Usage: threatfeed import FILE --url URL [--key KEY] [--api v1|v2] [--concurrency N]
                        [--failed FILE] [--retries N] [--json]

Sends the signal entries of FILE (a JSON array or NDJSON, of any size; - for stdin) to
URL/v1/signal or URL/v2/signal in batches of 1000. 429 and 5xx answers and lost connections are
retried with exponential backoff and jitter (honouring Retry-After); 206 and 400 are not retried
(their entries are reported as failed); 401, 402 and 403 stop the import.

  --url          base URL of the service, e.g. http://localhost:8080
  --key          API key with the signals:write scope; without it, $THREATFEED_API_KEY
                 (one of the two is required)
  --api          v1 (default) or v2
  --concurrency  batches in flight, 1 to 64 (default 4)
  --failed       write every entry that was not accepted to FILE as NDJSON:
                 {"index","reason","entry"} ("text" instead of "entry" when it is not JSON)
  --retries      attempts per batch before giving up, 1 to 100 (default ${DEFAULT_RETRY.attempts})
  --json         print one JSON summary

Exit status: 0 when every entry was accepted, 1 when some failed or the import stopped.`

const options = {
  url: { type: 'string' },
  key: { type: 'string' },
  api: { type: 'string' },
  concurrency: { type: 'string' },
  failed: { type: 'string' },
  retries: { type: 'string' },
} as const

function wholeNumber (option: string, v: string | undefined, dflt: number, min: number, max: number): number {
  if (v === undefined) return dflt
  const n = /^\d+$/.test(v) ? Number(v) : NaN
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new CliError(`--${option} must be a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`)
  return n
}

/** `http://host:8080/` + v1 → `http://host:8080/v1/signal`. */
export function signalUrl (base: string, api: 'v1' | 'v2'): string {
  let u: URL
  try {
    u = new URL(base)
  } catch {
    throw new CliError(`--url must be an http(s) URL, got ${JSON.stringify(base)}`)
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new CliError(`--url must be an http(s) URL, got ${JSON.stringify(base)}`)
  return `${u.origin}${u.pathname.replace(/\/+$/, '')}/${api}/signal`
}

/** One line of the --failed file. */
export function failedLine (entry: SourceEntry, reason: string): string {
  let parsed: unknown
  try {
    parsed = JSON.parse(entry.text)
  } catch {
    return JSON.stringify({ index: entry.index, reason, text: entry.text }) + '\n'
  }
  return JSON.stringify({ index: entry.index, reason, entry: parsed }) + '\n'
}

function formatSummary (file: string, s: LoadSummary): string {
  return `imported ${file}: ${s.entries} entries, ${s.accepted} accepted, ${s.failed} failed, ` +
    `${s.batches} batches, ${s.retries} retries in ${(s.elapsedMs / 1000).toFixed(1)} s (${Math.round(s.entriesPerSecond)} entries/s)\n`
}

/** `ETA 42s`, `ETA 3m05s`, `ETA 2h07m`; `--` while no entry has been acknowledged. */
export function formatEta (seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '--'
  const s = Math.ceil(seconds)
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
  return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`
}

interface ProgressBar {
  /** `n` more entries were read from the source; `end`: the source is exhausted. */
  read (n: number, end: boolean): void
  bytes (bytesRead: number): void
  acknowledged (p: LoadProgress): void
  stop (): void
}

/**
 * The terminal progress bar. It follows the entries the server has acknowledged (accepted or
 * failed), not the bytes read: the reader runs ahead of the answers by up to `concurrency`
 * batches. The number of entries is known only once the file is read to its end; until then it is
 * estimated from the entries read so far and the share of the file they filled, and shown as
 * `~N`. Without a file size (stdin) there is no estimate: a count only.
 */
function startBar (io: CliIo, totalBytes: number | null): ProgressBar {
  const bar = new cliProgress.SingleBar({
    stream: io.stderr,
    format: totalBytes === null
      ? '{done} entries acknowledged | {rate} entries/s | {failed} failed'
      : '{bar} {percentage}% | {done}/{entries} entries | {rate} entries/s | {failed} failed | ETA {remaining}',
    hideCursor: true,
    fps: 5,
    // The caller decided this is a terminal (io.isTTY); cli-progress would otherwise check the stream itself.
    noTTYOutput: true,
    notTTYSchedule: 1000,
  }, cliProgress.Presets.shades_classic)
  const started = performance.now()
  let read = 0
  let ended = false
  let bytesRead = 0
  let done = 0
  let failed = 0
  const draw = (): void => {
    const total = ended || totalBytes === null || bytesRead === 0 ? read : Math.max(read, Math.round(read * totalBytes / bytesRead))
    const seconds = (performance.now() - started) / 1000
    const rate = done / Math.max(0.001, seconds)
    bar.setTotal(Math.max(1, total, done))
    bar.update(done, {
      done,
      entries: total === 0 ? '?' : ended ? String(total) : `~${total}`,
      rate: Math.round(rate),
      failed,
      remaining: formatEta(done === 0 ? NaN : (total - done) / rate),
    })
  }
  // Payload names differ from cli-progress's own tokens (total, eta), which would override them.
  bar.start(1, 0, { done: 0, entries: '?', rate: 0, failed: 0, remaining: '--' })
  return {
    read (n, end) { read += n; ended ||= end; draw() },
    bytes (b) { bytesRead = b; draw() },
    acknowledged (p) { done = p.accepted + p.failed; failed = p.failed; draw() },
    stop () { bar.stop() },
  }
}

/** The source, telling the bar how many entries were read and when it ended. */
async function * counted (source: AsyncIterable<SourceEntry[]>, bar: ProgressBar | null): AsyncGenerator<SourceEntry[]> {
  for await (const entries of source) {
    bar?.read(entries.length, false)
    yield entries
  }
  bar?.read(0, true)
}

export const importCommand: Command = {
  name: 'import',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const { values, positionals } = parseOptions(args, options, true)
    if (values.help === true) return writeHelp(io, help)
    if (positionals.length !== 1) throw new CliError('expected exactly one FILE (or - for stdin)')
    const file = positionals[0]!
    if (values.url === undefined) throw new CliError('--url is required')
    const key = values.key ?? io.env.THREATFEED_API_KEY
    if (key === undefined || key === '') throw new CliError('--key is required (or set THREATFEED_API_KEY)')
    const api = values.api ?? 'v1'
    if (api !== 'v1' && api !== 'v2') throw new CliError(`--api must be v1 or v2, got ${JSON.stringify(api)}`)
    const url = signalUrl(values.url, api)
    const concurrency = wholeNumber('concurrency', values.concurrency, 4, 1, 64)
    const attempts = wholeNumber('retries', values.retries, DEFAULT_RETRY.attempts, 1, 100)

    let input: Readable
    let totalBytes: number | null = null
    if (file === '-') input = io.stdin
    else {
      try {
        totalBytes = statSync(file).size
      } catch (e) {
        throw new CliError(`cannot read ${file}: ${(e as Error).message}`, 1)
      }
      input = createReadStream(file, { highWaterMark: 1 << 20 })
    }
    let failedOut: WriteStream | null = null
    if (values.failed !== undefined) {
      failedOut = createWriteStream(values.failed)
      await once(failedOut, 'open')
    }
    const bar = io.isTTY ? startBar(io, totalBytes) : null
    let summary: LoadSummary
    try {
      summary = await loadEntries(counted(readEntries(input, (b) => bar?.bytes(b)), bar), {
        url,
        key,
        concurrency,
        retry: { ...DEFAULT_RETRY, attempts },
        onProgress: (p) => bar?.acknowledged(p),
        onFailed: failedOut === null ? undefined : (e, reason) => { failedOut.write(failedLine(e, reason)) },
      })
    } catch (e) {
      if (e instanceof SourceError) throw new CliError(`${file}: ${e.message}`, 1)
      throw e
    } finally {
      bar?.stop()
      if (failedOut !== null) {
        failedOut.end()
        await once(failedOut, 'close')
      }
    }
    if (values.json === true) writeJson(io, summary)
    else io.stdout.write(formatSummary(file, summary))
    if (summary.stopped !== null) io.stderr.write(`threatfeed: import stopped: ${summary.stopped}\n`)
    return summary.failed === 0 && summary.stopped === null ? 0 : 1
  },
}
