/**
 * Every feed test of test/http again, with two front-end threads (THREATFEED_HTTP_THREADS=2, which
 * the helpers honour: test/helpers/feed-server.ts threadsFromEnv): each file runs as a child
 * process of this one and its results count here, so `npm test` reports both set-ups in one total.
 */
import t from 'tap'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const files = readdirSync(here).filter((f) => /^feed-.*\.test\.ts$/.test(f) && f !== 'feed-threads.test.ts').sort()

// The files run one after another (each starts servers of its own); this one may take minutes.
t.setTimeout(1_200_000)
t.ok(files.length >= 17, `${files.length} feed test files`)
for (const f of files) {
  t.spawn(process.execPath, ['--import=tsx', join(here, f)], { env: { ...process.env, THREATFEED_HTTP_THREADS: '2' }, timeout: 300_000 }, `${f} with two front-end threads`)
}
