// Lint enforces the one-way dependency direction of STYLE.md:
//   errors, json, net  <-  expr  <-  geo, store, pool  <-  feed, ingest, stream  <-  http, cli  <-  main
// (expr uses net's address parsing; geo, store and pool may use expr, though only feed does today),
// that each third-party dependency is imported by exactly one choke-point folder, that no module
// imports itself through others (import-x/no-cycle), and that IPv4 text has one parser (below).
import js from '@eslint/js'
import tseslint from 'typescript-eslint'
import importX from 'eslint-plugin-import-x'
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript'

const thirdParty = {
  'uWebSockets.js': 'src/http',
  'mmdb-lib': 'src/geo',
  lmdb: 'src/store/embedded',
  mongodb: 'src/store/mongo',
  piscina: 'src/pool',
}

/**
 * The store's implementations are its own: everything outside src/store sees the interfaces at
 * its root (types.ts, batch-types.ts, consumer-thread.ts …), and main composes through open.ts.
 */
const storeImplementations = {
  group: ['**/store/embedded/*', '**/store/embedded/**', '**/store/mongo/*', '**/store/mongo/**'],
  message: 'only src/store/ imports a store implementation (store/embedded, store/mongo): use the interfaces at src/store/ (main: store/open.ts)',
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
  if (!folder.startsWith('src/store')) patterns.push(storeImplementations)
  return {
    files: [`${folder}/**/*.ts`],
    rules: { 'no-restricted-imports': ['error', { paths, patterns }] },
  }
}

/**
 * One IPv4 parser: net/ip.ts's readIpv4, which every reader of dotted quads calls (coalesce input,
 * feed targets, expression literals, IPv6 dotted tails). Four copies had grown, each "for speed";
 * this keeps a fifth from appearing. It can only go by names: a function, method or function-valued
 * variable outside src/net named like an IPv4 reader (parse/scan/read/lex/decode … ipv4/ip4/quad)
 * is an error. A parser under another name gets past it; test/net/ipv4-readers.test.ts then holds
 * every entry point to the one grammar, and review does the rest.
 */
const IPV4_READER = '/^(parse|scan|read|lex|decode).*(ipv?4|quad)/i'
const oneIpv4Parser = [
  `FunctionDeclaration[id.name=${IPV4_READER}]`,
  `VariableDeclarator[id.name=${IPV4_READER}] > :matches(ArrowFunctionExpression, FunctionExpression)`,
  `MethodDefinition[key.name=${IPV4_READER}]`,
].map((selector) => ({ selector, message: 'IPv4 text has one parser, readIpv4 in src/net/ip.ts: call it (see eslint.config.js)' }))
const noEnum = { selector: 'TSEnumDeclaration', message: 'no enum: use an as-const object and a union' }

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
      'no-restricted-syntax': ['error', noEnum],
    },
  },
  {
    files: ['src/**/*.ts', 'workers/**/*.ts'],
    ignores: ['src/net/**'],
    rules: { 'no-restricted-syntax': ['error', noEnum, ...oneIpv4Parser] },
  },
  {
    // No import cycles in src and workers: a cycle makes module order decide what is initialised
    // when, and hides a layering mistake inside one folder, where no-restricted-imports cannot see.
    // import-x skips `import type` edges (erased at compile time), so a cycle closed only by types passes.
    files: ['src/**/*.ts', 'workers/**/*.ts'],
    plugins: { 'import-x': importX },
    // Without extensions and parsers import-x reads no .ts module and silently finds no cycle.
    settings: {
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }] },
  },
  // The modules at src/'s root (main, config, log) have no layer rule but this one; a folder's rule
  // below replaces it for that folder's files (and carries it, outside src/store).
  { files: ['src/*.ts'], rules: { 'no-restricted-imports': ['error', { patterns: [storeImplementations] }] } },
  restrict('src/errors.ts', ['json', 'net', 'expr', 'geo', 'store', 'pool', ...upper]),
  restrict('src/json', ['net', 'expr', 'geo', 'store', 'pool', ...upper]),
  restrict('src/net', ['expr', 'geo', 'store', 'pool', ...upper]),
  restrict('src/threads', ['json', 'net', 'expr', 'geo', 'store', 'pool', ...upper]),
  restrict('src/expr', ['geo', 'store', 'pool', ...upper]), // expr may import net
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
