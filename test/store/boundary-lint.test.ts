/**
 * The store boundary (eslint.config.js): outside src/store, nothing in src/ or workers/ imports a
 * store implementation (store/embedded, store/mongo); main composes through store/open.ts. Linted
 * with the repository's own configuration, as `npx eslint .` does, on a source text placed at
 * each path (lintText with filePath: the file need not exist).
 */
import t from 'tap'
import { fileURLToPath } from 'node:url'
import { ESLint } from 'eslint'

const root = fileURLToPath(new URL('../..', import.meta.url))
const eslint = new ESLint({ cwd: root })

/** The messages of no-restricted-imports for `text` at `path` (relative to the repository). */
async function restricted (path: string, text: string): Promise<string[]> {
  const [result] = await eslint.lintText(text, { filePath: `${root}${path}` })
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message)
}

const importOf = (specifier: string): string => `import { x } from '${specifier}'\nexport const y = x\n`

t.test('an import of a store implementation from outside src/store is an error', async (t) => {
  const cases: Array<[path: string, specifier: string]> = [
    ['src/stream/boundary-fixture.ts', '../store/embedded/lmdb-env.js'],
    ['src/stream/boundary-fixture.ts', '../store/mongo/mongo-store.js'],
    ['src/stream/boundary-fixture.ts', '../store/embedded/packed-batch.js'],
    ['src/http/boundary-fixture.ts', '../store/embedded/embedded-store.js'],
    ['src/cli/boundary-fixture.ts', '../store/mongo/mongo-client.js'],
    ['src/feed/boundary-fixture.ts', '../store/embedded/rule-codec.js'],
    ['src/ingest/boundary-fixture.ts', '../store/embedded/byte-writer.js'],
    ['src/main.ts', './store/embedded/embedded-store.js'],
    ['src/config.ts', './store/mongo/mongo-store.js'],
  ]
  for (const [path, specifier] of cases) {
    const messages = await restricted(path, importOf(specifier))
    t.equal(messages.filter((m) => m.includes('only src/store/ imports a store implementation')).length, 1, `${path} importing ${specifier}`)
  }
})

t.test('the same import from inside src/store, and the store interfaces from anywhere, pass', async (t) => {
  const cases: Array<[path: string, specifier: string]> = [
    ['src/store/boundary-fixture.ts', './embedded/lmdb-env.js'],
    ['src/store/boundary-fixture.ts', './mongo/mongo-store.js'],
    ['src/store/embedded/boundary-fixture.ts', './lmdb-env.js'],
    ['src/store/mongo/boundary-fixture.ts', '../embedded/lmdb-env.js'],
    ['src/stream/boundary-fixture.ts', '../store/consumer-thread.js'],
    ['src/stream/boundary-fixture.ts', '../store/batch-types.js'],
    ['src/main.ts', './store/open.js'],
  ]
  for (const [path, specifier] of cases) {
    t.same(await restricted(path, importOf(specifier)), [], `${path} importing ${specifier}`)
  }
})
