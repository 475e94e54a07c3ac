/**
 * Every HTTP example of the docs pages, run against a real server: each answer block must equal
 * the real answer, modulo ids, keys and times (`npm run docs:examples` regenerates them).
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { EXAMPLE_PAGES, pageEnv } from './example-pages.js'
import { examplesOf, normalise, runPage } from './examples.js'

for (const name of EXAMPLE_PAGES) {
  t.test(`docs/${name}: every HTTP example answers as the page shows`, async (t) => {
    const page = readFileSync(new URL(`../../docs/${name}`, import.meta.url), 'utf8')
    t.ok(examplesOf(page).length > 0, 'the page has examples')
    for (const { example, rendered } of await runPage(page, pageEnv(name))) {
      const first = example.request.split('\n')[0]
      t.ok(example.answer, `${first}: the page shows its answer`)
      if (example.answer === null) continue
      t.equal(normalise(example.answer.text), normalise(rendered), `${first}: the page's answer is the real one (npm run docs:examples rewrites it)`)
    }
  })
}
