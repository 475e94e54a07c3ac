/**
 * Screenshots of the console's pages for docs/console/*.png, 1280 px wide, taken from the browser
 * tests' fixture (test/console/fixture.ts: a real server with a held list, a list of 64 polled
 * shards, a refused batch, two consumers) in Debian's chromium, as the tests drive it.
 *
 *   node --import=tsx scripts/console-screenshots.ts [OUT_DIR]   (default docs/console)
 *
 * The PNGs are kept small: one capture 1280 px wide and at most MAX_HEIGHT px tall per page.
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'
import { ensureConsoleBuilt } from '../test/console/built.js'
import { BLOCKED, EXPLAINED, startConsoleFixture } from '../test/console/fixture.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const OUT = process.argv[2] ?? join(ROOT, 'docs', 'console')
const WIDTH = 1280
const MAX_HEIGHT = 1400

ensureConsoleBuilt()
mkdirSync(OUT, { recursive: true })
const fx = await startConsoleFixture()
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
})
try {
  const page = await (await browser.newContext({ viewport: { width: WIDTH, height: 800 } })).newPage()
  await page.goto(`${fx.base}/console`)
  await page.locator('#key').fill(fx.adminKey)
  await page.locator('#key').press('Enter')
  await page.locator('table[data-testid="overview"]').waitFor()

  const shots: Array<{ name: string, hash: string, ready: string }> = [
    { name: 'overview', hash: '#/', ready: 'table[data-testid="overview"]' },
    { name: 'list', hash: `#/lists/${fx.guardedId}`, ready: '[data-testid="held-diff"]' },
    { name: 'list-sharded', hash: `#/lists/${fx.shardedId}`, ready: 'table[data-testid="variants"]' },
    { name: 'consumers', hash: '#/consumers', ready: 'table[data-testid="consumers"]' },
    { name: 'explain', hash: `#/explain?ip=${EXPLAINED}`, ready: '[data-testid="explain"]' },
    { name: 'explain-held', hash: `#/explain?ip=${BLOCKED[10]!}&list=${fx.guardedId}`, ready: '[data-testid="explain"] li.reason' },
    { name: 'batches', hash: '#/batches', ready: 'ol[data-testid="batches"] > li' },
    { name: 'keys', hash: '#/keys', ready: '[data-testid="this-key"]' },
  ]
  for (const s of shots) {
    await page.goto(`${fx.base}/console${s.hash}`)
    await page.locator(s.ready).first().waitFor({ timeout: 15_000 })
    const height = Math.min(MAX_HEIGHT, await page.evaluate('document.documentElement.scrollHeight') as number)
    await page.setViewportSize({ width: WIDTH, height })
    await page.screenshot({ path: join(OUT, `${s.name}.png`), clip: { x: 0, y: 0, width: WIDTH, height } })
    await page.setViewportSize({ width: WIDTH, height: 800 })
    process.stdout.write(`${join(OUT, `${s.name}.png`)} ${WIDTH}×${height}\n`)
  }
} finally {
  await browser.close()
  await fx.stop()
}
