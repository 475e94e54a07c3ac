/**
 * Shared benchmark plumbing: run an anchor and our command side by side, take medians, print a
 * table with ratios, and write machine-readable JSON to bench/results/<name>.json so later runs
 * can be compared.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync, openSync, closeSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import os from 'node:os'

export const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..')
export const repoDir = join(benchDir, '..')

export interface Row {
  /** What is measured, e.g. "coalesce 1M IPv4". */
  case: string
  /** Who: "threatfeed", "iprange", "python ipaddress", "nginx", … */
  subject: string
  /** Median of the runs. */
  value: number
  unit: string
  /** Every run, for the spread. */
  runs?: number[]
  /** Free-form extra figures (p99, RSS, …). */
  extra?: Record<string, number | string>
}

export interface Ratio {
  case: string
  /** e.g. "threatfeed / iprange wall time" */
  label: string
  value: number
  target?: string
  pass?: boolean
}

export function median (xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

export function percentile (xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!
}

/** The machine's CPU time so far, all cores, in clock ticks: in all, and stolen by the hypervisor. */
export interface CpuTicks { readonly total: number, readonly steal: number }

/** Reads /proc/stat's `cpu` line; null where there is none (not Linux). */
export function cpuTicks (): CpuTicks | null {
  let line: string | undefined
  try {
    line = readFileSync('/proc/stat', 'utf8').split('\n').find((l) => l.startsWith('cpu '))
  } catch {
    return null
  }
  if (line === undefined) return null
  // user nice system idle iowait irq softirq steal (guest time is counted in user already).
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number)
  return { total: f.reduce((a, b) => a + b, 0), steal: f[7] ?? 0 }
}

/**
 * The share of the machine's CPU time the hypervisor took between two readings, in percent: on a
 * shared VM the same build runs at half speed in minutes when this is high, so wall figures are
 * reported beside it.
 */
export function stealPercent (before: CpuTicks | null, after: CpuTicks | null): number | null {
  if (before === null || after === null || after.total <= before.total) return null
  return 100 * (after.steal - before.steal) / (after.total - before.total)
}

/** True when an executable is on PATH. */
export function hasCommand (name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0
}

/** Installs Debian packages when a command is missing (benchmarks run as root here); says so. */
export function ensureCommand (command: string, aptPackage: string): boolean {
  if (hasCommand(command)) return true
  process.stderr.write(`bench: ${command} not found; installing Debian package ${aptPackage}\n`)
  spawnSync('sh', ['-c', `apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${aptPackage} >/dev/null 2>&1`], { stdio: 'inherit' })
  const ok = hasCommand(command)
  if (!ok) process.stderr.write(`bench: ${aptPackage} could not be installed; its anchor is skipped\n`)
  return ok
}

export interface TimedRun { ms: number, stdout: Buffer, code: number | null }

/**
 * Runs a command once with stdin from a file and returns wall time (spawn to exit) and stdout.
 * Wall time includes process start, as a user of the command would see it.
 */
export function timeCommandOnce (argv: string[], opts: { stdinFile?: string, cwd?: string, env?: NodeJS.ProcessEnv } = {}): Promise<TimedRun> {
  return new Promise((resolve, reject) => {
    const fd = opts.stdinFile !== undefined ? openSync(opts.stdinFile, 'r') : 'ignore'
    const t0 = process.hrtime.bigint()
    const child = spawn(argv[0]!, argv.slice(1), { stdio: [fd, 'pipe', 'inherit'], cwd: opts.cwd ?? repoDir, env: opts.env ?? process.env })
    const out: Buffer[] = []
    child.stdout!.on('data', (c: Buffer) => out.push(c))
    child.on('error', reject)
    child.on('close', (code) => {
      if (typeof fd === 'number') closeSync(fd)
      resolve({ ms: Number(process.hrtime.bigint() - t0) / 1e6, stdout: Buffer.concat(out), code })
    })
  })
}

/**
 * Races several subjects on the same input, alternating them run by run so drift in the
 * machine's state hits each equally. Returns per-subject runs and the last stdout of each.
 */
export async function race (subjects: { name: string, argv: string[], env?: NodeJS.ProcessEnv }[], opts: { stdinFile?: string, runs: number }): Promise<Map<string, { ms: number[], stdout: Buffer }>> {
  const res = new Map<string, { ms: number[], stdout: Buffer }>()
  for (const s of subjects) res.set(s.name, { ms: [], stdout: Buffer.alloc(0) })
  for (let i = 0; i < opts.runs; i++) {
    for (const s of subjects) {
      const r = await timeCommandOnce(s.argv, { stdinFile: opts.stdinFile, env: s.env })
      if (r.code !== 0) throw new Error(`${s.name} exited with ${r.code}`)
      const slot = res.get(s.name)!
      slot.ms.push(r.ms)
      slot.stdout = r.stdout
    }
  }
  return res
}

function pad (s: string, n: number): string { return s.length >= n ? s : s + ' '.repeat(n - s.length) }

export function printTable (title: string, rows: Row[], ratios: Ratio[]): void {
  const lines: string[] = [`\n## ${title}`, '']
  const w = [Math.max(4, ...rows.map(r => r.case.length)), Math.max(7, ...rows.map(r => r.subject.length))]
  lines.push(`${pad('case', w[0]!)}  ${pad('subject', w[1]!)}  median`)
  for (const r of rows) {
    const spread = r.runs !== undefined && r.runs.length > 1 ? `  (min ${fmt(Math.min(...r.runs))}, max ${fmt(Math.max(...r.runs))})` : ''
    const extra = r.extra !== undefined ? '  ' + Object.entries(r.extra).map(([k, v]) => `${k}=${typeof v === 'number' ? fmt(v) : v}`).join(' ') : ''
    lines.push(`${pad(r.case, w[0]!)}  ${pad(r.subject, w[1]!)}  ${fmt(r.value)} ${r.unit}${spread}${extra}`)
  }
  if (ratios.length > 0) {
    lines.push('', 'ratios:')
    for (const q of ratios) {
      const verdict = q.pass === undefined ? '' : q.pass ? '  PASS' : '  MISS'
      lines.push(`  ${q.case}: ${q.label} = ${q.value.toFixed(3)}${q.target !== undefined ? ` (target ${q.target})` : ''}${verdict}`)
    }
  }
  process.stdout.write(lines.join('\n') + '\n')
}

function fmt (x: number): string {
  if (Math.abs(x) >= 1000) return x.toFixed(0)
  if (Math.abs(x) >= 10) return x.toFixed(1)
  return x.toFixed(3)
}

/** Writes bench/results/<name>.json with the machine description, rows and ratios. */
export function writeResults (name: string, rows: Row[], ratios: Ratio[], meta: Record<string, unknown> = {}): string {
  const dir = join(benchDir, 'results')
  mkdirSync(dir, { recursive: true })
  const file = join(dir, `${name}.json`)
  writeFileSync(file, JSON.stringify({
    name,
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, memGiB: Math.round(os.totalmem() / 2 ** 30), node: process.version },
    meta,
    rows,
    ratios,
  }, null, 2) + '\n')
  return file
}

/** Prints and writes in one go; the common ending of every bench script. */
export function report (name: string, title: string, rows: Row[], ratios: Ratio[], meta: Record<string, unknown> = {}): void {
  printTable(title, rows, ratios)
  const file = writeResults(name, rows, ratios, meta)
  process.stdout.write(`results: ${file}\n`)
}
