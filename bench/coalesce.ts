/**
 * `threatfeed coalesce` end to end (process start, stdin, parse, sort, merge, stdout) on a
 * million random prefixes per family, raced against the C anchor `iprange --optimize` (IPv4
 * only) and Python's `ipaddress.collapse_addresses` (both families). Outputs must be byte for
 * byte identical, or the bench fails: a fast wrong answer is not a result.
 *
 * iprange prints host routes without a prefix (`1.2.3.4`), so it runs with
 * `--print-suffix-ips /32`, which makes its output the same bytes as ours; nothing is
 * normalised after the fact.
 *
 * Targets (issue 3): threatfeed ≤ 0.75× iprange wall time on IPv4; ≥ 50× faster than Python on
 * both families. Start-up: `threatfeed --help`, whole process. With BENCH_BASE_TREE (lib/base.ts)
 * the base build's command runs in the same rounds, for both.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ensureCommand, hasCommand, median, race, repoDir, report, type Ratio, type Row } from './lib/report.js'
import { makeRandom } from './lib/random.js'
import { baseNode, baseTree } from './lib/base.js'

/** BENCH_COALESCE_LINES shrinks the input for a quick check of the bench itself. */
const LINES = Number(process.env.BENCH_COALESCE_LINES ?? 1_000_000)
const RUNS = 5
const PYTHON_RUNS = 1
/** The command as installed: bin/threatfeed.js (module compile cache on) → dist/src/cli/run.js. */
const bin = join(repoDir, 'bin', 'threatfeed.js')
const entry = join(repoDir, 'dist', 'src', 'cli', 'run.js')

/**
 * Brings dist up to date. tsc's incremental build (dist/.tsbuildinfo) knows by content hash which
 * files changed, which file times cannot tell, so it always runs; with nothing to do it only
 * re-checks. It still emits when files outside this command have type errors.
 */
function ensureBuilt (): void {
  const r = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: repoDir, stdio: ['ignore', 'ignore', 'inherit'] })
  if (r.status !== 0) process.stderr.write('bench: tsc reported errors (see the lead\'s build); running the emitted files anyway\n')
  if (!existsSync(entry)) throw new Error(`the build did not produce ${entry}`)
}

/**
 * A blocklist-shaped mix: 70 % hosts (half written with /32), 20 % /24–/31, 10 % /16–/23; most
 * networks written as their network address, a fifth with host bits set. About a third of the
 * space ends up covered, so merging really happens and the output is still ~700k lines.
 */
function makeIpv4 (): string {
  const rnd = makeRandom(0x9e3779b9)
  const out: string[] = []
  for (let i = 0; i < LINES; i++) {
    const r = rnd() % 100
    const len = r < 70 ? 32 : r < 90 ? 24 + rnd() % 8 : 16 + rnd() % 8
    let a = rnd()
    if (len < 32 && rnd() % 5 !== 0) a = (a & ((0xffffffff << (32 - len)) >>> 0)) >>> 0
    const text = `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`
    out.push(len === 32 && rnd() % 2 === 0 ? text : `${text}/${len}`)
  }
  return out.join('\n') + '\n'
}

/**
 * Global unicast (2000::/3): 50 % /128 (half without the suffix), 20 % /64, 15 % /48, 10 %
 * /56–/127, 5 % /32–/47, written in full uncompressed form so parsing sees every group.
 */
function makeIpv6 (): string {
  const rnd = makeRandom(0x85ebca6b)
  const out: string[] = []
  for (let i = 0; i < LINES; i++) {
    const r = rnd() % 100
    const len = r < 50 ? 128 : r < 70 ? 64 : r < 85 ? 48 : r < 95 ? 56 + rnd() % 72 : 32 + rnd() % 16
    const w = [((rnd() & 0x1fffffff) | 0x20000000) >>> 0, rnd(), rnd(), rnd()]
    for (let k = 0; k < 4; k++) {
      const bits = len - 32 * k
      if (bits < 32) w[k] = bits <= 0 ? 0 : (w[k]! & ((0xffffffff << (32 - bits)) >>> 0)) >>> 0
    }
    const text = w.flatMap((x) => [(x >>> 16).toString(16), (x & 0xffff).toString(16)]).join(':')
    out.push(len === 128 && rnd() % 2 === 0 ? text : `${text}/${len}`)
  }
  return out.join('\n') + '\n'
}

const PYTHON = `import sys, ipaddress
v4, v6 = [], []
for line in sys.stdin:
    line = line.strip()
    if not line or line.startswith('#'):
        continue
    n = ipaddress.ip_network(line, strict=False)
    (v4 if n.version == 4 else v6).append(n)
out = [str(n) for n in ipaddress.collapse_addresses(v4)] + [str(n) for n in ipaddress.collapse_addresses(v6)]
sys.stdout.write('\\n'.join(out) + ('\\n' if out else ''))
`

/**
 * The bench machine is shared, so wall times swing with other work; CPU time (user + sys) swings
 * far less. When GNU time is there, every run is wrapped in it, appending `user sys` per run to a
 * file per subject, and the CPU medians are reported beside the wall times (the targets stay on
 * wall time). The wrapper's own fork costs every subject the same ~1 ms.
 */
const GNU_TIME = '/usr/bin/time'
const withCpu = hasCommand(GNU_TIME)

function timed (s: { name: string, argv: string[] }, dir: string): { name: string, argv: string[] } {
  if (!withCpu) return s
  const file = cpuFile(dir, s.name)
  rmSync(file, { force: true })
  return { name: s.name, argv: [GNU_TIME, '-a', '-o', file, '-f', '%U %S', ...s.argv] }
}

function cpuFile (dir: string, name: string): string {
  return join(dir, `cpu-${name.replace(/\W+/g, '-')}.txt`)
}

/** Median CPU ms of the runs recorded since the file was last reset, or undefined. */
function cpuMedian (dir: string, name: string): number | undefined {
  if (!withCpu || !existsSync(cpuFile(dir, name))) return undefined
  const runs = readFileSync(cpuFile(dir, name), 'utf8').trim().split('\n')
    .map((l) => l.split(' ').map(Number)).filter((p) => p.length === 2 && p.every(Number.isFinite))
    .map(([u, s]) => 1000 * (u! + s!))
  return runs.length > 0 ? median(runs) : undefined
}

function lineCount (b: Buffer): number {
  let n = 0
  for (let i = b.indexOf(10); i >= 0; i = b.indexOf(10, i + 1)) n++
  return n
}

function firstDifference (a: Buffer, b: Buffer): string {
  const la = a.toString().split('\n')
  const lb = b.toString().split('\n')
  for (let i = 0; i < Math.max(la.length, lb.length); i++) {
    if (la[i] !== lb[i]) return `line ${i + 1}: ${JSON.stringify(la[i])} vs ${JSON.stringify(lb[i])}`
  }
  return 'none'
}

async function main (): Promise<void> {
  ensureBuilt()
  const hasIprange = ensureCommand('iprange', 'iprange')
  const dir = join(tmpdir(), 'threatfeed-bench-coalesce')
  mkdirSync(dir, { recursive: true })
  const v4File = join(dir, 'ipv4.txt')
  const v6File = join(dir, 'ipv6.txt')
  const pyFile = join(dir, 'collapse.py')
  writeFileSync(v4File, makeIpv4())
  writeFileSync(v6File, makeIpv6())
  writeFileSync(pyFile, PYTHON)

  const node = process.execPath
  // Every fast subject on the same core (1), so that none gains from a second one.
  const pin = hasCommand('taskset') ? ['taskset', '-c', '1'] : []
  const threatfeed = { name: 'threatfeed', argv: [...pin, node, bin, 'coalesce'] }
  const base = baseTree === '' ? null : { name: 'threatfeed (base)', argv: [...pin, baseNode, join(baseTree, 'bin', 'threatfeed.js'), 'coalesce'] }
  const iprange = { name: 'iprange', argv: [...pin, 'iprange', '--optimize', '--print-suffix-ips', '/32'] }
  const python = { name: 'python ipaddress', argv: ['python3', pyFile] }
  const rows: Row[] = []
  const ratios: Ratio[] = []
  const mismatches: string[] = []

  // What every Node process pays before our first line runs, and the command's own start-up. One
  // unmeasured run each first: it fills the module compile cache as any earlier run would have.
  const helps = [{ name: 'threatfeed', argv: [...pin, node, bin, '--help'] }, ...(base === null ? [] : [{ name: 'threatfeed (base)', argv: [...pin, baseNode, join(baseTree, 'bin', 'threatfeed.js'), '--help'] }])]
  const empty = { name: 'node', argv: [...pin, node, '-e', ''] }
  await race([empty, ...helps], { runs: 1 })
  const startup = await race([empty, ...helps], { runs: RUNS * 2 })
  const startupMs = median(startup.get('node')!.ms)
  rows.push({ case: 'node start-up (empty script)', subject: 'node', value: startupMs, unit: 'ms', runs: startup.get('node')!.ms })
  for (const h of helps) rows.push({ case: 'threatfeed --help (start-up)', subject: h.name, value: median(startup.get(h.name)!.ms), unit: 'ms', runs: startup.get(h.name)!.ms })
  if (base !== null) ratios.push({ case: 'threatfeed --help (start-up)', label: 'threatfeed / base wall time', value: median(startup.get('threatfeed')!.ms) / median(startup.get('threatfeed (base)')!.ms) })

  for (const [family, file] of [['IPv4', v4File], ['IPv6', v6File]] as const) {
    const label = `coalesce ${LINES >= 1e6 ? `${LINES / 1e6}M` : LINES} ${family}`
    const fastSubjects = [threatfeed, ...(base === null ? [] : [base]), ...(family === 'IPv4' && hasIprange ? [iprange] : [])]
    const fast = await race(fastSubjects.map((x) => timed(x, dir)), { stdinFile: file, runs: RUNS })
    const slow = await race([timed(python, dir)], { stdinFile: file, runs: PYTHON_RUNS })
    const cpu = new Map([...fastSubjects, python].map((x) => [x.name, cpuMedian(dir, x.name)]))
    const ours = fast.get('threatfeed')!
    const ourCpu = cpu.get('threatfeed')
    const inputBytes = statSync(file).size
    rows.push({
      case: label,
      subject: 'threatfeed',
      value: median(ours.ms),
      unit: 'ms',
      runs: ours.ms,
      extra: { cpuMs: ourCpu ?? 'n/a', inputMB: inputBytes / 2 ** 20, outputLines: lineCount(ours.stdout) },
    })
    const anchors = [...fast.entries(), ...slow.entries()].filter(([name]) => name !== 'threatfeed')
    for (const [name, res] of anchors) {
      rows.push({ case: label, subject: name, value: median(res.ms), unit: 'ms', runs: res.ms, extra: { cpuMs: cpu.get(name) ?? 'n/a' } })
      if (!res.stdout.equals(ours.stdout)) mismatches.push(`${label}: threatfeed and ${name} differ (${lineCount(ours.stdout)} vs ${lineCount(res.stdout)} lines; first difference ${firstDifference(ours.stdout, res.stdout)})`)
    }
    const ip = fast.get('iprange')
    if (ip !== undefined) {
      const r = median(ours.ms) / median(ip.ms)
      ratios.push({ case: label, label: 'threatfeed / iprange wall time', value: r, target: '≤ 0.75', pass: r <= 0.75 })
      const b = fast.get('threatfeed (base)')
      if (b !== undefined) ratios.push({ case: label, label: 'threatfeed (base) / iprange wall time', value: median(b.ms) / median(ip.ms) })
      const ipCpu = cpu.get('iprange')
      if (ourCpu !== undefined && ipCpu !== undefined) ratios.push({ case: label, label: 'threatfeed / iprange CPU time (for reference)', value: ourCpu / ipCpu })
    }
    const py = slow.get('python ipaddress')!
    const speedup = median(py.ms) / median(ours.ms)
    ratios.push({ case: label, label: 'python / threatfeed wall time (speed-up)', value: speedup, target: '≥ 50', pass: speedup >= 50 })
  }

  report('coalesce', 'threatfeed coalesce vs iprange and Python ipaddress (wall time, process start included)', rows, ratios, {
    lines: LINES, runs: RUNS, pythonRuns: PYTHON_RUNS, identicalOutputs: mismatches.length === 0,
  })
  if (mismatches.length > 0) {
    for (const m of mismatches) process.stderr.write(`bench: OUTPUT MISMATCH ${m}\n`)
    process.exitCode = 1
  } else {
    process.stdout.write('outputs: byte-identical across all subjects\n')
  }
}

await main()
