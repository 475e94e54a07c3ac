#!/usr/bin/env node
// `npm run bench [name...]`: runs bench/<name>.ts for every benchmark (or the named ones), one
// after another so they never compete for the two cores, each under tsx.
import { readdirSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const dir = dirname(fileURLToPath(import.meta.url))
const wanted = process.argv.slice(2)
const all = readdirSync(dir).filter((f) => f.endsWith('.ts')).map((f) => f.slice(0, -3)).sort()
const names = wanted.length > 0 ? wanted : all
let failed = 0
for (const name of names) {
  if (!all.includes(name)) { console.error(`bench: no benchmark ${name} (have: ${all.join(', ')})`); failed++; continue }
  console.log(`\n# bench/${name}`)
  const r = spawnSync(process.execPath, ['--import=tsx', join(dir, `${name}.ts`)], { stdio: 'inherit', cwd: join(dir, '..') })
  if (r.status !== 0) { console.error(`bench/${name} exited with ${r.status}`); failed++ }
}
process.exit(failed === 0 ? 0 : 1)
