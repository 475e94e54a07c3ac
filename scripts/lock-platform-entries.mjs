#!/usr/bin/env node
// Adds package-lock entries for optional platform binaries that the registry reachable here does
// not serve (uWebSockets.js and msgpackr-extract list darwin, win32 and arm builds this registry
// lacks). Without an entry `npm ci` calls the lock out of sync; with one, marked optional and
// tagged with its os/cpu, npm skips it on other platforms and fetches it by name on its own.
// Run after `npm install` changes the lock: node scripts/lock-platform-entries.mjs
import { readFileSync, writeFileSync } from 'node:fs'

const lockPath = new URL('../package-lock.json', import.meta.url)
const lock = JSON.parse(readFileSync(lockPath, 'utf8'))
const packages = lock.packages
const PLATFORM = /(?:^|[-/])(darwin|linux|win32)-(x64|arm64|arm)(?:-|$)/
let added = 0
for (const [path, entry] of Object.entries(packages)) {
  for (const [name, spec] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${name}`
    if (packages[key] !== undefined || packages[`${path}/${key}`] !== undefined) continue
    const m = PLATFORM.exec(name.split('/').pop())
    if (m === null) continue
    packages[key] = { version: spec, cpu: [m[2]], license: entry.license, optional: true, os: [m[1]] }
    added++
  }
}
lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)))
writeFileSync(lockPath, JSON.stringify(lock, null, 2) + '\n')
console.log(`lock: added ${added} platform entries`)
