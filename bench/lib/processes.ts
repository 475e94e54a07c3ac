/**
 * The processes a race starts (servers pinned to a core, wrk, nginx): one set per bench, so an
 * exit or ^C stops them all, and what CPU each spent, read from /proc.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { createInterface } from 'node:readline'
import { repoDir } from './report.js'

/** Every child started through spawnPinned, stopped by stopChildren (and at exit). */
export const children = new Set<ChildProcess>()

export function stopChildren (): void {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM')
}

/** A TCP port free on 127.0.0.1 a moment ago. */
export function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const a = s.address()
      s.close(() => { resolve(typeof a === 'object' && a !== null ? a.port : 0) })
    })
  })
}

/**
 * `sh -c 'ulimit -n <hard>; exec taskset -c <core> …'`: open files raised to the hard limit (10,000
 * idle sockets need it), and thanks to exec the pid is the final program's.
 */
export function spawnPinned (core: string, argv: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const quoted = argv.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ')
  const child = spawn('sh', ['-c', `ulimit -n $(ulimit -Hn) && exec taskset -c ${core} ${quoted}`], { cwd: repoDir, env, stdio: ['pipe', 'pipe', 'inherit'] })
  children.add(child)
  child.on('exit', () => { children.delete(child) })
  return child
}

/** The rest of the first stdout line of `child` that starts with `prefix`; rejects when it exits first. */
export function waitForLine (child: ChildProcess, prefix: string, timeoutMs = 180_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! })
    const timer = setTimeout(() => { reject(new Error(`no "${prefix}" within ${timeoutMs} ms`)) }, timeoutMs)
    const onExit = (code: number | null): void => { clearTimeout(timer); reject(new Error(`exited with ${code} before "${prefix}"`)) }
    child.once('exit', onExit)
    rl.on('line', (line) => {
      if (!line.startsWith(prefix)) return
      clearTimeout(timer)
      child.off('exit', onExit)
      rl.close()
      resolve(line.slice(prefix.length).trim())
    })
  })
}

/** The process and its descendants (nginx's worker is a child of its master). */
export function processTree (pid: number): number[] {
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter((x) => x !== '').map(Number)
    return [pid, ...kids.flatMap(processTree)]
  } catch {
    return [pid]
  }
}

/** User + system CPU seconds of a process tree (clock ticks of 1/100 s on Linux). */
export function cpuSeconds (pid: number): number {
  let ticks = 0
  for (const p of processTree(pid)) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // The process ended: its time is no longer readable.
    }
  }
  return ticks / 100
}
