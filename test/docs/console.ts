/**
 * The `console` blocks of a docs/ page: each `$ ` line runs through bash from the repository's
 * root, with `threatfeed` the built command on PATH, and prints (stdout and stderr) the lines the
 * page shows under it, the root's path written as relative.
 */
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { NO_COVERAGE, THREATFEED_BIN } from '../helpers/cli.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface Ran { command: string, shown: string, printed: string }

export function runConsoleBlocks (page: string, env: Record<string, string> = {}): Ran[] {
  const dir = mkdtempSync(join(tmpdir(), 'tf-doc-console-'))
  try {
    writeFileSync(join(dir, 'threatfeed'), `#!/bin/sh\nexec "${process.execPath}" "${THREATFEED_BIN}" "$@"\n`)
    chmodSync(join(dir, 'threatfeed'), 0o755)
    const out: Ran[] = []
    for (const m of page.matchAll(/```console\n([\s\S]*?)```/g)) {
      for (const part of m[1]!.split(/^\$ /m).slice(1)) {
        const command = part.slice(0, part.indexOf('\n'))
        const shown = part.slice(part.indexOf('\n') + 1)
        const r = spawnSync('bash', ['--norc', '-c', `${command} 2>&1`], { cwd: ROOT, env: { PATH: `${dir}:${process.env.PATH ?? ''}`, ...NO_COVERAGE, ...env }, encoding: 'utf8' })
        out.push({ command, shown, printed: r.stdout.replaceAll(ROOT, '') })
      }
    }
    return out
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
