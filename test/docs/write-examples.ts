/**
 * `npm run docs:examples`: rewrites the answer blocks of the pages with HTTP examples from the
 * answers of a real server (test/docs/examples.ts). Run it after changing what a route answers;
 * test/docs/examples.test.ts fails until the pages agree again.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { EXAMPLE_PAGES, pageEnv } from './example-pages.js'
import { rewrite, runPage } from './examples.js'

for (const name of EXAMPLE_PAGES) {
  const file = new URL(`../../docs/${name}`, import.meta.url)
  const page = readFileSync(file, 'utf8')
  const next = rewrite(page, await runPage(page, pageEnv(name)))
  if (next !== page) writeFileSync(file, next)
  process.stdout.write(`${name}: ${next === page ? 'unchanged' : 'rewritten'}\n`)
}
process.exit(0)
