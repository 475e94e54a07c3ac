/**
 * The console's build output, made when missing or older than its sources (the test command runs
 * `npm run build` first, so in CI this only checks).
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
export const CONSOLE_DIR = join(ROOT, 'dist', 'console')

function newest (dir: string): number {
  let t = statSync(dir).mtimeMs
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs)
  }
  return t
}

export function ensureConsoleBuilt (): string {
  const index = join(CONSOLE_DIR, 'index.html')
  const sources = Math.max(newest(join(ROOT, 'console')), statSync(join(ROOT, 'scripts', 'build-console.mjs')).mtimeMs)
  if (!existsSync(index) || statSync(index).mtimeMs < sources) {
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.mjs')], { stdio: 'ignore' })
  }
  return CONSOLE_DIR
}
