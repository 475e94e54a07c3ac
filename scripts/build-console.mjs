#!/usr/bin/env node
// Builds the operator console (console/) into dist/console: one JavaScript and one CSS bundle
// named by content hash under assets/ (served as immutable), and index.html naming them (served
// no-cache). esbuild bundles Preact in: nothing is fetched from elsewhere at run time.
// Usage: node scripts/build-console.mjs [--out DIR]
import { build } from 'esbuild'
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const outFlag = process.argv.indexOf('--out')
const out = outFlag === -1 ? join(root, 'dist', 'console') : process.argv[outFlag + 1]
// Built beside the target and renamed into place, so a server starting meanwhile never reads half a build.
const work = `${out}.tmp-${process.pid}`
const assets = join(work, 'assets')
rmSync(work, { recursive: true, force: true })
mkdirSync(assets, { recursive: true })

const result = await build({
  entryPoints: { app: join(root, 'console', 'src', 'main.tsx') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome100', 'firefox100', 'safari15'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  entryNames: '[name]-[hash]',
  outdir: assets,
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
  tsconfig: join(root, 'console', 'tsconfig.json'),
})

const names = Object.keys(result.metafile.outputs).map((p) => basename(p))
const js = names.find((n) => n.endsWith('.js'))
const css = names.find((n) => n.endsWith('.css'))
if (js === undefined || css === undefined) throw new Error(`console build: expected one .js and one .css, got ${names.join(', ')}`)
const html = readFileSync(join(root, 'console', 'index.html'), 'utf8')
  .replace('{{css}}', `assets/${css}`)
  .replace('{{js}}', `assets/${js}`)
if (html.includes('{{')) throw new Error('console build: a placeholder of console/index.html was left unfilled')
writeFileSync(join(work, 'index.html'), html)
rmSync(out, { recursive: true, force: true })
renameSync(work, out)
console.log(`console: ${relative(root, out) || out} (${js}, ${css})`)
