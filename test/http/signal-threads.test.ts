/**
 * Every signal test of test/http again, with two front-end threads (THREATFEED_HTTP_THREADS=2):
 * each signal then crosses from a thread to the main thread over a MessagePort
 * (src/http/handover.ts), and the bad-input tables must answer exactly as with one thread. Each
 * file runs as a child process of this one and its results count here (as feed-threads.test.ts).
 */
import t from 'tap'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const files = readdirSync(here).filter((f) => /^signal.*\.test\.ts$/.test(f) && f !== 'signal-threads.test.ts').sort()

t.setTimeout(900_000)
t.ok(files.length >= 6, `${files.length} signal test files`)
for (const f of files) {
  t.spawn(process.execPath, ['--import=tsx', join(here, f)], { env: { ...process.env, THREATFEED_HTTP_THREADS: '2' }, timeout: 300_000 }, `${f} with two front-end threads`)
}
