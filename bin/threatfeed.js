#!/usr/bin/env node
// Entry point of the `threatfeed` command. Builds the TypeScript sources first when dist/ is
// missing or older than any source file (so `npm start` works straight after `npm ci`), and for
// `serve` the operator console too (dist/console, scripts/build-console.mjs) when it is missing
// or older than console/, then runs the compiled CLI.
import { existsSync, readdirSync, statSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createRequire, enableCompileCache } from 'node:module'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const entry = join(root, 'dist', 'src', 'cli', 'run.js')
const stamp = join(root, 'dist', '.tsbuildinfo')

/** The newest modification time of the files under `dir` whose name ends with `suffix` (0 when none). */
function newest (dir, suffix = '') {
  let t = 0
  if (!existsSync(dir)) return t
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    t = Math.max(t, e.isDirectory() ? newest(p, suffix) : e.name.endsWith(suffix) ? statSync(p).mtimeMs : 0)
  }
  return t
}

const stale = !existsSync(entry) || !existsSync(stamp) ||
  Math.max(newest(join(root, 'src'), '.ts'), newest(join(root, 'workers'), '.ts')) > statSync(stamp).mtimeMs
if (stale && existsSync(join(root, 'src'))) {
  let tsc
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
  } catch {
    console.error('threatfeed: dist/ is missing or stale and TypeScript is not installed; run `npm ci` then `npm run build`')
    process.exit(1)
  }
  process.stderr.write('threatfeed: building (tsc -p tsconfig.build.json)…\n')
  const r = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root })
  if (r.status !== 0) process.exit(r.status ?? 1)
}

// Only `serve` answers /console; the other commands need not wait for a bundle.
const consoleScript = join(root, 'scripts', 'build-console.mjs')
const consoleIndex = join(root, 'dist', 'console', 'index.html')
if (process.argv[2] === 'serve' && existsSync(join(root, 'console')) && existsSync(consoleScript) &&
    (!existsSync(consoleIndex) || Math.max(newest(join(root, 'console')), statSync(consoleScript).mtimeMs) > statSync(consoleIndex).mtimeMs)) {
  let bundler = true
  try {
    createRequire(import.meta.url).resolve('esbuild')
  } catch {
    bundler = false
  }
  if (!bundler) {
    // The server still serves everything else; its log says /console answers 404.
    process.stderr.write('threatfeed: dist/console is missing or stale and esbuild is not installed; run `npm ci` then `npm run build` for /console\n')
  } else {
    process.stderr.write('threatfeed: building the console (scripts/build-console.mjs)…\n')
    const r = spawnSync(process.execPath, [consoleScript], { stdio: ['ignore', 'ignore', 'inherit'], cwd: root })
    if (r.status !== 0) process.exit(r.status ?? 1)
  }
}

// V8's code cache for the compiled modules, kept in the OS temp directory: a start after the first
// skips parsing and compiling them.
enableCompileCache()
await import(pathToFileURL(entry).href)
