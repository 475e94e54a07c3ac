/**
 * The console in a real browser (issue #22): Debian's chromium driven by playwright-core against a
 * real server with data (test/console/fixture.ts). Each page is checked against what the admin API
 * answers, reached by keyboard alone, free of horizontal scrolling at 1280×800 and 390×844, without
 * console errors or failed requests; a screenshot of each goes to test/artifacts/console/.
 * Skipped, with one line saying so, where /usr/bin/chromium is missing.
 */
import t, { type Test } from 'tap'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { ensureConsoleBuilt, ROOT } from './built.js'

const CHROMIUM = '/usr/bin/chromium'
const ARTIFACTS = join(ROOT, 'test', 'artifacts', 'console')

if (!existsSync(CHROMIUM)) {
  t.plan(0, `${CHROMIUM} is missing (apt-get install chromium), so the console's browser tests did not run`)
} else {
  await run()
}

async function run (): Promise<void> {
  // About a minute alone; more beside the rest of the suite on two cores.
  t.setTimeout(360_000)
  const { chromium } = await import('playwright-core')
  const { startConsoleFixture, BLOCKED, EXPLAINED, FAILED_REASON, GUARDED, HOSTILE, OTHER_EXPLAINED, OTHER_RULE_NAME, OTHER_WORKSPACE, REFUSED_OUTCOME } = await import('./fixture.js')
  ensureConsoleBuilt()
  mkdirSync(ARTIFACTS, { recursive: true })
  const fx = await startConsoleFixture()
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  })
  t.teardown(async () => { await browser.close(); await fx.stop() })
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
  const page = await context.newPage()

  // Everything that went wrong in a page: console errors, uncaught exceptions, failed or refused requests, dialogs.
  const problems: string[] = []
  const watch = (p: typeof page): void => {
    p.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`) })
    p.on('pageerror', (e) => { problems.push(`page error: ${e.message}`) })
    p.on('requestfailed', (r) => { problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText ?? ''}`) })
    p.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`) })
    p.on('dialog', (d) => { problems.push(`dialog: ${d.message()}`); void d.dismiss() })
    p.on('request', (r) => { if (!r.url().startsWith(fx.base) && !r.url().startsWith('data:')) problems.push(`request to another origin: ${r.url()}`) })
  }
  watch(page)

  // Code that runs in the page is given as text: the tests' tsconfig has no DOM types.
  const inPage = <T>(expression: string): Promise<T> => page.evaluate(expression) as Promise<T>

  const shoot = async (name: string): Promise<void> => {
    await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true })
  }

  /** No horizontal scrolling at the desktop and the phone size; back at desktop size after. */
  const noSideScroll = async (tt: Test, name: string): Promise<void> => {
    for (const [width, height] of [[1280, 800], [390, 844]] as const) {
      await page.setViewportSize({ width, height })
      const { scroll, client } = await inPage<{ scroll: number, client: number }>('({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })')
      tt.ok(scroll <= client, `${name} at ${width}×${height}: content ${scroll} px wide in ${client} px`)
      if (width === 390) await shoot(`${name}-390`)
    }
    await page.setViewportSize({ width: 1280, height: 800 })
  }

  /**
   * Tab from the top of the page reaches every link, button and field (each once at least, within
   * twice their number of presses); what is reached is marked in the DOM, not guessed.
   */
  const everyActionByTab = async (tt: Test, name: string): Promise<void> => {
    const total = await inPage<number>(`(() => {
      const all = [...document.querySelectorAll('a[href], button:not([disabled]), input:not([disabled]), select:not([disabled])')]
      all.forEach((el, i) => { el.dataset.tabCheck = String(i) })
      document.activeElement?.blur()
      return all.length
    })()`)
    const reached = new Set<string>()
    for (let i = 0; i < total * 2 + 2 && reached.size < total; i++) {
      await page.keyboard.press('Tab')
      const id = await inPage<string | null>('document.activeElement?.dataset.tabCheck ?? null')
      if (id !== null) reached.add(id)
    }
    tt.equal(reached.size, total, `${name}: Tab reaches all ${total} links, buttons and fields`)
  }

  const visit = async (hash: string, ready: string): Promise<void> => {
    await page.goto(`${fx.base}/console${hash}`)
    await page.locator(ready).first().waitFor({ timeout: 10_000 })
  }

  await t.test('sign-in by keyboard: the key is kept in sessionStorage only, sent as a header', async (t) => {
    await page.goto(`${fx.base}/console`)
    await page.locator('#key').waitFor()
    await noSideScroll(t, 'signin')
    await shoot('signin')
    await page.keyboard.press('Tab')
    t.equal(await inPage<string>('document.activeElement?.id'), 'key', 'the first Tab lands on the key field')
    const sent = page.waitForRequest((r) => r.url().endsWith('/v1/admin/workspaces'))
    await page.keyboard.type(fx.adminKey)
    await page.keyboard.press('Enter')
    t.equal((await sent).headers().authorization, `Bearer ${fx.adminKey}`)
    await page.locator('nav[aria-label="Pages"]').waitFor()
    const stored = await inPage<unknown>('({ session: Object.values(sessionStorage), local: localStorage.length, cookie: document.cookie })')
    t.same(stored, { session: [fx.adminKey], local: 0, cookie: '' })
    t.same((await context.cookies()), [], 'no cookie at all')
  })

  await t.test('sign-in refused: a table of keys, each answered with its reason and nothing kept', async (t) => {
    const cases = [
      { description: 'not a key', key: 'tf_not-a-key', expected: /^Unauthorized|key/i },
      { description: 'a valid key without an admin scope', key: fx.feedKey, expected: /^This key has no admin scope\.$/ },
    ]
    for (const c of cases) {
      const other = await browser.newContext({ viewport: { width: 1280, height: 800 } })
      const p = await other.newPage()
      await p.goto(`${fx.base}/console`)
      await p.locator('#key').fill(c.key)
      await p.locator('#key').press('Enter')
      t.match(await p.getByRole('alert').innerText(), c.expected, c.description)
      t.same(await p.evaluate('Object.keys(sessionStorage)'), [], `${c.description}: nothing kept`)
      await other.close()
    }
  })

  await t.test('overview: each list with entries, bytes, guard state and a sparkline, as the API says', async (t) => {
    await visit('#/', 'table[data-testid="overview"]')
    const lists = await fx.api<{ items: Array<{ id: string, name: string, defaults: { format?: string, family?: string, action?: string }, publish: { last_modified: string | null, held: { guards: Record<string, string> } | null } }> }>('/v1/admin/lists')
    const history = await fx.api<{ items: Array<{ list: string, variant: string, points: Array<{ entries: number, bytes: number }> }> }>(`/v1/admin/feed-versions?list=${fx.guardedId}`)
    const edge = lists.items.find((l) => l.name === GUARDED)!
    // The list sets no defaults: the server's own (README "Lists") are what the overview counts.
    const defaults = { format: edge.defaults.format ?? 'plain', family: edge.defaults.family ?? 'both', action: edge.defaults.action ?? 'block' }
    const variant = history.items.find((h) => h.variant === `${defaults.format}|${defaults.family}|${defaults.action}|`)
    t.ok(variant, 'the API has the default variant\'s history')
    const last = variant!.points[variant!.points.length - 1]!
    const row = page.locator(`tr[data-list="${fx.guardedId}"]`)
    t.match(await row.locator('td[data-label="Entries"]').innerText(), `${defaults.family} ${defaults.action} ${last.entries.toLocaleString('en')}`)
    // The guard by what it does, not by its field (max_shrink_pct).
    t.same(edge.publish.held!.guards, { block: 'max_shrink_pct' }, 'the API: held by max_shrink_pct')
    t.equal(await row.locator('td[data-label="Guards"]').innerText(), 'held (block: Largest shrink)')
    // Last change: the feed's Last-Modified (publish.last_modified), not the hourly sample's time.
    t.ok(edge.publish.last_modified !== null, 'the API: the guarded list published')
    t.equal(await row.locator('td[data-label="Last change"]').innerText(), `${edge.publish.last_modified!.slice(0, 19).replace('T', ' ')}Z`)
    // A list nobody polled never published: it says so, and when its history will start.
    const hostile = lists.items.find((l) => l.name === HOSTILE)!
    t.equal(hostile.publish.last_modified, null, 'the API: never published')
    const never = page.locator(`tr[data-list="${hostile.id}"]`)
    t.equal(await never.locator('td[data-label="Last change"]').innerText(), 'never published')
    t.equal(await never.locator('td[data-label="Guards"]').innerText(), 'not published yet (built when first polled); no guards')
    t.match(await never.locator('td[data-label="Trend"]').innerText(), /^no history yet: starts within 5 min of the first poll$/)
    t.notOk((await page.locator('table[data-testid="overview"]').innerText()).includes('max_shrink_pct'), 'no raw guard field')
    t.equal(await row.locator('svg.spark').count(), 1, 'a sparkline')
    t.equal(await page.locator('tr[data-list]').count(), lists.items.length + 1, 'every list and the workspace feed')
    // The hostile list name is text: the cell holds it verbatim and the page has no <img> at all.
    t.ok((await page.locator('td[data-label="List"]').allInnerTexts()).includes(HOSTILE), 'the hostile name shows as text')
    t.equal(await page.locator('img').count(), 0, 'no element made of it')
    await shoot('overview')
    await noSideScroll(t, 'overview')
    await everyActionByTab(t, 'overview')
  })

  await t.test('a list: variants, shards, defaults, the held build with accept, the 30-day chart', async (t) => {
    await visit(`#/lists/${fx.guardedId}`, 'h1[data-testid="list-name"]')
    const list = await fx.api<{ name: string, publish: { held: { digest: string, diff: { block: { published: number, held: number, added: number, removed: number, removed_sample: string[] } } } | null } }>(`/v1/admin/lists/${fx.guardedId}`)
    t.equal(await page.locator('h1[data-testid="list-name"]').innerText(), list.name)
    t.match(await page.locator('[data-testid="guard-state"]').innerText(), /^held/)
    t.match(await page.locator('.held-box').innerText(), list.publish.held!.digest)
    // Accept with the diff the API has: what publishing the held build changes.
    const d = list.publish.held!.diff.block
    t.equal(await page.locator('[data-testid="held-diff"] li[data-action="block"]').innerText().then((x) => x.split('\n')[0]),
      `block: ${d.published} networks published → ${d.held} in the held build (${d.removed} removed, ${d.added} added)`)
    t.same(await page.locator('[data-testid="held-diff"] li[data-action="block"] p.sample code').allInnerTexts(), d.removed_sample, 'the removed sample')
    t.equal(await page.locator('dd[data-guard="max_shrink_pct"]').innerText(), '50 % between builds')
    t.notOk((await page.locator('main').innerText()).includes('max_shrink_pct'), 'no raw guard field on the page')
    t.equal(await page.getByRole('button', { name: 'Accept held build' }).count(), 1)
    t.equal(await page.locator('figure.chart svg').count(), 1, 'the chart')
    const history = await fx.api<{ items: Array<{ variant: string, points: Array<{ entries: number }> }> }>(`/v1/admin/feed-versions?list=${fx.guardedId}`)
    const shown = await page.locator('table[data-testid="variants"] td[data-testid="variant-entries"]').allInnerTexts()
    t.same(shown.sort(), history.items.map((h) => h.points[h.points.length - 1]?.entries.toLocaleString('en') ?? '—').sort(), 'each variant\'s entries')
    t.same(await page.locator('table[data-testid="variants"] td[data-label="Variant"]').allInnerTexts(), history.items.map((h) => h.variant === 'plain|both|block|' ? 'plain, IPv4 + IPv6, block' : h.variant).sort(), 'named, not keyed')
    await shoot('list')
    await noSideScroll(t, 'list')
    await everyActionByTab(t, 'list')
  })

  await t.test('a list of 64 polled shards: one row per variant, the shards folded, no raw keys (issue 36)', async (t) => {
    // The fixture's polls are recorded a moment after they are answered: the page is read once they all are.
    let history = { items: [] as Array<{ variant: string, points: Array<{ entries: number }> }> }
    for (let i = 0; i < 100 && history.items.length < 128; i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 100))
      history = await fx.api<typeof history>(`/v1/admin/feed-versions?list=${fx.shardedId}`)
    }
    await visit(`#/lists/${fx.shardedId}`, 'table[data-testid="variants"]')
    t.equal(history.items.length, 128, 'the API: 64 shards of two formats')
    const table = page.locator('table[data-testid="variants"]')
    t.same(await table.locator('td[data-label="Variant"]').allInnerTexts(), ['dialect A, IPv4 + IPv6, block', 'plain, IPv4 + IPv6, block'])
    const height = (await table.boundingBox())!.height
    t.ok(height < 300, `the table is ${height} px tall at 1280 px`)
    t.notOk((await table.innerText()).includes('|'), 'no variant key in the table')
    const sum = history.items.filter((h) => h.variant.startsWith('plain|')).reduce((n, h) => n + h.points[h.points.length - 1]!.entries, 0)
    t.equal(await table.locator('tr[data-variant="plain, IPv4 + IPv6, block"] td[data-label="Entries"]').innerText(), sum.toLocaleString('en'), 'the shards\' entries summed')
    await table.locator('tr[data-variant="plain, IPv4 + IPv6, block"] summary').click()
    t.equal(await table.locator('tr[data-variant="plain, IPv4 + IPv6, block"] ul.shards li').count(), 64, 'each shard on asking')
    t.match(await table.locator('tr[data-variant="plain, IPv4 + IPv6, block"] ul.shards li').nth(2).innerText(), /^shard 3 of 64: 103 entries/)
    await shoot('list-sharded')
    await noSideScroll(t, 'list-sharded')
  })

  await t.test('consumers: the stale one first', async (t) => {
    await visit('#/consumers', 'table[data-testid="consumers"]')
    const api = await fx.api<{ items: Array<{ user_agent: string | null, stale: boolean, list: string, address: string, variant: string }> }>('/v1/admin/consumers')
    const rows = page.locator('table[data-testid="consumers"] tbody tr')
    t.equal(await rows.count(), api.items.length, 'one row per consumer the API lists')
    t.same(api.items.filter((c) => c.list === '*').map((c) => [c.user_agent, c.stale]), [['PAN-OS-B', true], ['FortiGate-A', false]], 'the API: of the workspace feed\'s pollers, B stale, A fresh')
    t.same(await rows.locator('td[data-label="Address"]').allInnerTexts(), api.items.map((c) => c.address), 'in the API\'s order: stale first')
    t.match(await rows.filter({ hasText: 'PAN-OS-B' }).innerText(), /^stale \(silent\)\t127\.0\.0\.3/)
    t.match(await rows.filter({ hasText: 'FortiGate-A' }).innerText(), /^fresh\t127\.0\.0\.2/)
    t.ok(await rows.first().innerText().then((r) => r.startsWith('stale')), 'a stale one on top')
    // At 1280 px no address, name or header is broken inside a word: each word's text is on one line.
    const broken = await inPage<string[]>(`(() => {
      const out = []
      for (const td of document.querySelectorAll('table[data-testid="consumers"] td, table[data-testid="consumers"] th')) {
        const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT)
        for (let n = walker.nextNode(); n !== null; n = walker.nextNode()) {
          const text = n.textContent
          // A word, or the part of one up to a hyphen or slash (where a line may break, UAX #14).
          for (const m of text.matchAll(/[^\\s\\/-]+[\\/-]?/g)) {
            const r = document.createRange()
            r.setStart(n, m.index)
            r.setEnd(n, m.index + m[0].length)
            const lines = new Set([...r.getClientRects()].map((x) => Math.round(x.top)))
            if (lines.size > 1) out.push((td.dataset.label ?? 'heading') + ': ' + m[0])
          }
        }
      }
      return out
    })()`)
    t.same(broken, [], 'no word broken across lines')
    const named: Record<string, string> = { 'plain|both|block|': 'plain, IPv4 + IPv6, block', 'plain|both|block||1/64': 'plain, IPv4 + IPv6, block, shard 1 of 64' }
    t.same(await rows.locator('td[data-label="Variant"]').allInnerTexts(), api.items.map((c) => named[c.variant] ?? c.variant), 'variants named, not keyed')
    // Filtered by the guarded list: only its poller (the fixture's own checks, User-Agent node).
    const only = await fx.api<{ items: Array<{ user_agent: string | null }> }>(`/v1/admin/consumers?list=${fx.guardedId}`)
    t.same(only.items.map((c) => c.user_agent), ['node'])
    await page.locator('#consumer-list').selectOption(fx.guardedId)
    await page.waitForURL(`**/console#/consumers?list=${fx.guardedId}`)
    await page.locator('table[data-testid="consumers"] tbody tr').nth(1).waitFor({ state: 'detached' })
    t.equal(await rows.count(), 1)
    t.match(await rows.first().innerText(), /node[\s\S]*edge/)
    await shoot('consumers')
    await noSideScroll(t, 'consumers')
    await everyActionByTab(t, 'consumers')
  })

  await t.test('explain: an address typed and sent with Enter; the tree feed → action → network → rule', async (t) => {
    await visit('#/explain', '#explain-ip')
    await page.locator('#explain-ip').focus()
    await page.keyboard.type(EXPLAINED)
    await page.keyboard.press('Enter')
    await page.locator('[data-testid="explain"]').waitFor()
    const api = await fx.api<{ feeds: Array<{ feed: string, name: string, actions: { block: { published: boolean, formats: Array<{ network?: string | null }> } } }> }>(`/v1/admin/explain?ip=${EXPLAINED}`)
    const ws = api.feeds.find((f) => f.feed === '*')!
    const node = page.locator('li[data-feed="*"] > ul > li[data-action="block"]')
    t.equal(await node.locator('strong').first().innerText(), ws.actions.block.published ? 'published' : 'not published')
    t.ok(ws.actions.block.published, `${EXPLAINED} is published in the workspace feed`)
    const network = ws.actions.block.formats.find((f) => f.network !== undefined && f.network !== null)!.network!
    t.match(await node.innerText(), new RegExp(`NETWORK\\s+${network.replace(/\./g, '\\.').replace('/', '\\/')}[\\s\\S]*RULE\\s+block ip`, 'i'))
    t.ok((await node.locator('q').allInnerTexts()).includes(HOSTILE), 'the rule\'s hostile name as text')
    t.equal(await page.locator('img').count(), 0)
    t.match(await page.locator('li[data-feed="*"]').innerText(), new RegExp(`^FEED\\s+${api.feeds.find((f) => f.feed === '*')!.name}`, 'i'))
    await shoot('explain')
    await noSideScroll(t, 'explain')
    await everyActionByTab(t, 'explain')
  })

  await t.test('explain on a held list: the next build stays held, not "the next build drops it" (issue 36)', async (t) => {
    const dropped = BLOCKED[10]!
    await visit(`#/explain?ip=${dropped}&list=${fx.guardedId}`, '[data-testid="explain"]')
    const api = await fx.api<{ feeds: Array<{ feed: string, actions: { block: { published: boolean, reasons: Array<{ code: string, message: string }> } } }> }>(`/v1/admin/explain?ip=${dropped}&list=${fx.guardedId}`)
    const block = api.feeds[0]!.actions.block
    t.ok(block.published, 'the API: still published (the held build would drop it)')
    t.same(block.reasons.map((r) => r.code), ['held'], 'the API: reason held')
    const node = page.locator(`li[data-feed="${fx.guardedId}"] > ul > li[data-action="block"]`)
    const why = await node.locator('li.reason').allInnerTexts()
    t.equal(why.length, 1)
    t.match(why[0], /holds this feed's new block builds since .* until build [0-9a-f]{32} is accepted/)
    t.notOk((await node.innerText()).includes('the next build drops it'))
    await shoot('explain-held')
  })

  await t.test('explain with an admin:all key: another workspace picked, its tree, as /v1/admin/explain says', async (t) => {
    const rootContext = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    const p = await rootContext.newPage()
    watch(p)
    await p.goto(`${fx.base}/console`)
    await p.locator('#key').fill(fx.rootKey)
    await p.locator('#key').press('Enter')
    await p.locator('nav a', { hasText: 'Explain' }).click()
    await p.locator('header select').selectOption({ label: OTHER_WORKSPACE })
    await p.locator('#explain-ip').fill(OTHER_EXPLAINED)
    await p.locator('#explain-ip').press('Enter')
    const tree = p.locator('[data-testid="explain"]')
    await tree.locator('p').filter({ hasText: OTHER_WORKSPACE }).waitFor()
    const res = await fetch(`${fx.base}/v1/admin/explain?workspace=${fx.otherWorkspaceId}&ip=${OTHER_EXPLAINED}`, { headers: { authorization: `Bearer ${fx.rootKey}` } })
    const api = await res.json() as { workspace: { name: string }, feeds: Array<{ feed: string, actions: { block: { published: boolean, rules: Array<{ name: string | null }> } } }> }
    t.equal(api.workspace.name, OTHER_WORKSPACE)
    const ws = api.feeds.find((f) => f.feed === '*')!
    t.same(ws.actions.block.rules.map((r) => r.name), [OTHER_RULE_NAME], 'the API: the other workspace\'s rule')
    t.match(await tree.locator('p').first().innerText(), new RegExp(`^${OTHER_EXPLAINED.replace(/\./g, '\\.')} \\(v4\\) in workspace ${OTHER_WORKSPACE} at `))
    const node = tree.locator('li[data-feed="*"] > ul > li[data-action="block"]')
    t.equal(await node.locator('strong').first().innerText(), ws.actions.block.published ? 'published' : 'not published')
    t.same(await node.locator('q').allInnerTexts(), [OTHER_RULE_NAME], 'the rule of the workspace picked, not of the key\'s own')
    await p.screenshot({ path: join(ARTIFACTS, 'explain-admin-all.png'), fullPage: true })
    await rootContext.close()
  })

  await t.test('overview with an admin:all key: another workspace\'s feed held, accepted by keyboard, as the API then says', async (t) => {
    const rootContext = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    const p = await rootContext.newPage()
    watch(p)
    const workspace = async (): Promise<{ guards: { accepted?: string | null } | null, publish: { held: { digest: string, guards: Record<string, string> } | null } }> =>
      await (await fetch(`${fx.base}/v1/admin/workspaces/${fx.otherWorkspaceId}`, { headers: { authorization: `Bearer ${fx.rootKey}` } })).json() as never
    await p.goto(`${fx.base}/console`)
    await p.locator('#key').fill(fx.rootKey)
    await p.locator('#key').press('Enter')
    await p.locator('table[data-testid="overview"]').waitFor()
    await p.locator('header select').selectOption({ label: OTHER_WORKSPACE })
    const cell = p.locator('tr[data-list="*"] td[data-label="Guards"]')
    await cell.filter({ hasText: 'held' }).waitFor()
    const held = (await workspace()).publish.held
    t.ok(held !== null, 'the API: the workspace feed\'s build is held')
    t.same(held!.guards, { block: 'min_entries' })
    t.match(await cell.innerText(), /^held \(block: Minimum entries\)\n/)
    // Accepting says what it changes: the API's diff, before the button.
    t.match(await cell.locator('[data-testid="held-diff"]').innerText(), /block: 2 networks published → 1 in the held build \(1 removed, 0 added\)/)
    await p.screenshot({ path: join(ARTIFACTS, 'overview-workspace-held.png'), fullPage: true })
    await cell.getByRole('button', { name: 'Accept held build' }).focus()
    await p.keyboard.press('Enter')
    await p.locator('[role="status"]').filter({ hasText: 'Accepted' }).waitFor()
    t.equal((await workspace()).guards?.accepted, held!.digest, 'the API records the held build\'s digest as accepted')
    await rootContext.close()
  })

  await t.test('batches: failures first, with each failed entry\'s reason', async (t) => {
    await visit('#/batches', 'ol[data-testid="batches"] > li')
    const api = await fx.api<{ items: Array<{ failed: number, errors: string[] }> }>('/v1/admin/batches?failed=true')
    t.same(api.items[0]?.errors, [FAILED_REASON], 'the API has the reason')
    const first = page.locator('ol[data-testid="batches"] > li').first()
    t.match(await first.innerText(), /^1 failed, 1 of 2 entries accepted/)
    // The v2 batch refused whole: all its 7 entries counted, none accepted.
    const refused = await fx.api<{ items: Array<{ status: number, entries: number, accepted: number, failed: number }> }>('/v1/admin/batches?failed=true')
    t.match(refused.items.find((b) => b.status === 400), { entries: 7, accepted: 0, failed: 2 }, 'the API')
    t.same(await page.locator('[data-testid="batch-outcome"]').filter({ hasText: 'refused' }).allInnerTexts(), [REFUSED_OUTCOME])
    t.same(await first.locator('ul.reasons li').allInnerTexts(), [FAILED_REASON])
    const posted = await fx.api<{ items: Array<{ key_id: string | null }> }>('/v1/admin/batches')
    t.ok(posted.items.length > 0 && posted.items.every((b) => b.key_id === fx.feedKeyId), 'the API: every batch posted by the signals key')
    t.same(await page.locator('[data-testid="batch-key"]').allInnerTexts(), posted.items.map((b) => b.key_id), 'each batch names its key id')
    t.notOk((await page.locator('ol[data-testid="batches"]').innerText()).includes(fx.feedKey), 'never the key itself')
    await shoot('batches')
    await noSideScroll(t, 'batches')
    await everyActionByTab(t, 'batches')
  })

  await t.test('keys: one created and revoked with the keyboard, as the API then says', async (t) => {
    await visit('#/keys', 'table[data-testid="keys"]')
    const before = await fx.api<{ items: Array<{ id: string }> }>('/v1/admin/keys')
    await page.getByRole('checkbox', { name: 'rules:read' }).focus()
    await page.keyboard.press('Space')
    await page.getByRole('button', { name: 'Create key' }).focus()
    await page.keyboard.press('Enter')
    const created = page.locator('[data-testid="created-key"]')
    await created.waitFor()
    const after = await fx.api<{ items: Array<{ id: string, scopes: string[], revoked_at: string | null }> }>('/v1/admin/keys')
    const fresh = after.items.find((k) => !before.items.some((b) => b.id === k.id))
    t.ok(fresh, 'the API lists one more key')
    t.same(fresh!.scopes.sort(), ['feeds:read', 'rules:read'])
    t.match(await created.innerText(), fresh!.id)
    t.match(await created.locator('code.secret').innerText(), /^tf_[A-Za-z0-9_-]{43}$/, 'the key, shown once')
    await page.locator(`tr[data-key="${fresh!.id}"]`).waitFor()
    // The key this session signed in with is marked, by id (GET /v1/admin/whoami), and only it.
    t.same(await page.locator('[data-testid="this-key"]').count(), 1)
    t.equal(await page.locator(`tr[data-key="${fx.adminKeyId}"] [data-testid="this-key"]`).innerText(), 'this session\'s key')
    t.match(await page.locator('[data-testid="session-key"]').innerText(), new RegExp(`^key ${fx.adminKeyId.slice(0, 8)} · admin$`))
    await shoot('keys')
    await noSideScroll(t, 'keys')
    await everyActionByTab(t, 'keys')
    await page.getByRole('button', { name: `Revoke key ${fresh!.id}` }).focus()
    await page.keyboard.press('Enter')
    await page.getByRole('button', { name: 'Confirm revoke' }).focus()
    await page.keyboard.press('Enter')
    await page.locator(`tr[data-key="${fresh!.id}"] td[data-label="State"]`).filter({ hasText: 'revoked' }).waitFor()
    const revoked = (await fx.api<{ items: Array<{ id: string, revoked_at: string | null }> }>('/v1/admin/keys')).items.find((k) => k.id === fresh!.id)
    t.not(revoked?.revoked_at ?? null, null, 'the API says revoked')
  })

  await t.test('guards from the list page by keyboard: drop mode, hold mode, accept the held build', async (t) => {
    await visit(`#/lists/${fx.guardedId}`, '.held-box')
    const guards = async (): Promise<{ mode?: string, accepted?: string | null }> =>
      (await fx.api<{ guards: { mode?: string, accepted?: string | null } }>(`/v1/admin/lists/${fx.guardedId}`)).guards
    for (const [button, mode] of [['Drop on a trip (mode drop)', 'drop'], ['Hold on a trip (mode hold)', 'hold']] as const) {
      await page.getByRole('button', { name: button }).focus()
      await page.keyboard.press('Enter')
      await page.locator('[role="status"]').filter({ hasText: `Mode set to ${mode}.` }).waitFor()
      t.equal((await guards()).mode, mode, `the API: mode ${mode}`)
    }
    const held = (await fx.api<{ publish: { held: { digest: string } | null } }>(`/v1/admin/lists/${fx.guardedId}`)).publish.held
    await page.getByRole('button', { name: 'Accept held build' }).focus()
    await page.keyboard.press('Enter')
    await page.locator('[role="status"]').filter({ hasText: 'Accepted' }).waitFor()
    t.equal((await guards()).accepted, held?.digest, 'the API records the held build\'s digest as accepted')
  })

  await t.test('the overview loads in under 300 ms on loopback (median of five warm loads)', async (t) => {
    await visit('#/', 'table[data-testid="overview"]')
    const loads: number[] = []
    for (let i = 0; i < 5; i++) {
      await page.reload()
      await page.locator('table[data-testid="overview"]').waitFor()
      loads.push(await inPage<number>(`(() => {
        const nav = performance.getEntriesByType('navigation')[0]
        return nav.loadEventEnd - nav.startTime
      })()`))
    }
    const median = [...loads].sort((a, b) => a - b)[2]!
    t.comment(`overview load event: ${loads.map((n) => n.toFixed(1)).join(', ')} ms; median ${median.toFixed(1)} ms`)
    t.ok(median < 300, `median ${median.toFixed(1)} ms < 300 ms`)
  })

  await t.test('a key revoked while signed in: the next request answers 401 and the console returns to sign-in, forgetting it', async (t) => {
    const made = await fetch(`${fx.base}/v1/admin/keys`, { method: 'POST', headers: { authorization: `Bearer ${fx.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ scopes: ['admin'] }) })
    const { id, key } = await made.json() as { id: string, key: string }
    const other = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    const p = await other.newPage()
    await p.goto(`${fx.base}/console`)
    await p.locator('#key').fill(key)
    await p.locator('#key').press('Enter')
    await p.locator('table[data-testid="overview"]').waitFor()
    await fetch(`${fx.base}/v1/admin/keys/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${fx.adminKey}` } })
    // The catalog polls every 100 ms here (THREATFEED_POLL_MS): the revoke holds well within a second.
    await new Promise((resolve) => setTimeout(resolve, 1000))
    await p.locator('nav a', { hasText: 'Batches' }).click()
    await p.locator('#key').waitFor()
    t.same(await p.evaluate('Object.keys(sessionStorage)'), [], 'the key is forgotten')
    await other.close()
  })

  await t.test('sign out forgets the key', async (t) => {
    await visit('#/', 'table[data-testid="overview"]')
    await page.getByRole('button', { name: 'Sign out' }).focus()
    await page.keyboard.press('Enter')
    await page.locator('#key').waitFor()
    t.same(await inPage<string[]>('Object.keys(sessionStorage)'), [])
  })

  await t.test('no console error, page error, dialog, failed or refused request, nor a request elsewhere on any page', async (t) => {
    t.same(problems, [])
    t.equal(BLOCKED.length, 20)
  })
}
