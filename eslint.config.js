// Lint enforces the one-way dependency direction of STYLE.md:
//   errors, json, net, expr  <-  geo, store, pool  <-  feed, ingest, stream  <-  http, cli  <-  main
// and that each third-party dependency is imported by exactly one choke-point folder.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

const thirdParty = {
  'uWebSockets.js': 'src/http',
  'mmdb-lib': 'src/geo',
  lmdb: 'src/store/embedded',
  mongodb: 'src/store/mongo',
  piscina: 'src/pool',
}

/** Patterns a folder may not import: every layer above it, and every choke-pointed package it does not own. */
function restrict (folder, forbiddenFolders) {
  const paths = Object.entries(thirdParty)
    .filter(([, owner]) => !folder.startsWith(owner))
    .map(([name, owner]) => ({ name, message: `only ${owner}/ imports ${name}` }))
  const patterns = forbiddenFolders.map((f) => ({
    group: [`**/${f}/*`, `**/${f}/**`],
    message: `${folder}/ must not depend on ${f}/ (see STYLE.md: dependencies point one way)`,
  }))
  return {
    files: [`${folder}/**/*.ts`],
    rules: { 'no-restricted-imports': ['error', { paths, patterns }] },
  }
}

const upper = ['feed', 'ingest', 'stream', 'http', 'cli']
export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/node_modules/**', 'bench/results/**', '.tap/**', 'coverage/**', 'data/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', performance: 'readonly', queueMicrotask: 'readonly', structuredClone: 'readonly', fetch: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-syntax': ['error', { selector: 'TSEnumDeclaration', message: 'no enum: use an as-const object and a union' }],
    },
  },
  restrict('src/errors.ts', ['json', 'net', 'expr', 'geo', 'store', 'pool', ...upper]),
  restrict('src/json', ['net', 'expr', 'geo', 'store', 'pool', ...upper]),
  restrict('src/net', ['expr', 'geo', 'store', 'pool', ...upper]),
  restrict('src/expr', ['geo', 'store', 'pool', ...upper]),
  restrict('src/geo', ['store', 'pool', ...upper]),
  restrict('src/store', ['geo', 'pool', ...upper]),
  restrict('src/store/embedded', ['geo', 'pool', ...upper]),
  restrict('src/store/mongo', ['geo', 'pool', ...upper]),
  restrict('src/pool', ['store', ...upper]),
  restrict('src/feed', ['http', 'cli', 'ingest', 'stream']),
  restrict('src/ingest', ['http', 'cli', 'feed']),
  restrict('src/stream', ['http', 'cli', 'feed']),
  restrict('src/http', ['cli']),
  restrict('src/cli', ['http']),
  restrict('workers', ['store', 'http', 'cli', 'ingest', 'stream']),
)
