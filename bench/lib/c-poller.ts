/**
 * bench/bigws/poller.c, built with `cc` once per bench process into a directory removed at exit:
 * the open-loop poller of bench/bigws and the appliances of bench/fleet (`--fleet`).
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { repoDir } from './report.js'

let built: string | null | undefined

/** The poller's path, or null when it does not build (no C compiler). */
export function buildCPoller (): string | null {
  if (built !== undefined) return built
  const dir = mkdtempSync(join(tmpdir(), 'tf-poller-'))
  process.on('exit', () => { rmSync(dir, { recursive: true, force: true }) })
  const bin = join(dir, 'poller')
  const cc = spawnSync('cc', ['-O2', '-Wall', '-o', bin, join(repoDir, 'bench/bigws/poller.c')], { stdio: ['ignore', 'inherit', 'inherit'] })
  built = cc.status === 0 ? bin : null
  return built
}
