/**
 * `threatfeed coalesce`: addresses, CIDRs and ranges on stdin → the minimal sorted CIDR list on
 * stdout. The general-purpose face of src/net (no /8 or /12 target floors here), and a benchmark
 * of it: stdin is read as bytes, parsed in place with char codes, radix-sorted and written back
 * as bytes (see bench/coalesce.ts for the race against iprange and Python).
 */
import { readFile } from 'node:fs/promises'
import type { Readable, Writable } from 'node:stream'
import { CliError, parseOptions, writeHelp, writeJson, type CliIo, type Command } from './command.js'
import { explainInvalid } from '../net/explain.js'
import { NetworkSetBuilder, type FamilyFilter, type NetworkSet } from '../net/network-set.js'
import { scanLines } from '../net/scan-lines.js'

/** Refused lines printed one by one; past this only their number is reported. */
const MAX_REPORTED = 100

const FAMILIES: readonly FamilyFilter[] = ['v4', 'v6', 'both']

const help = `Usage: threatfeed coalesce [--family v4|v6|both] [--subtract FILE] [--skip-invalid] [--json]

Reads IP addresses, CIDRs and ranges (first-last), one per line, on stdin and prints the
smallest equivalent list of CIDRs: overlapping and adjacent networks merged, IPv4 before IPv6,
each in address order, hosts as /32 and /128, one per line.

Input: blank lines are skipped and "#" starts a comment. Addresses are strict: no leading zeros
in IPv4 octets, no hex or integer IPv4 forms, no IPv6 zone ids. A CIDR with host bits set means
its network; an IPv4-mapped IPv6 address (::ffff:192.0.2.1) is read as IPv4.

Options:
  --family v4|v6|both  print only that family (default both)
  --subtract FILE      remove every address listed in FILE (same format) from the result
  --skip-invalid       report invalid lines on stderr but still print the result, exit 0
  --json               print {"ok","count","networks","invalid","invalidCount"} instead

Invalid lines are reported on stderr as <source>:<line>: <reason>. Without --skip-invalid
any invalid line makes the command print nothing and exit 1.
`

interface InvalidEntry { source: string, line: number, text: string, reason: string }

/** Collects refused lines across stdin and the --subtract file, printing the first ones. */
class InvalidReport {
  readonly entries: InvalidEntry[] = []
  count = 0
  readonly #io: CliIo

  constructor (io: CliIo) {
    this.#io = io
  }

  add (source: string, line: number, text: string): void {
    this.count++
    if (this.count > MAX_REPORTED) return
    const reason = explainInvalid(text, { ranges: true })
    this.entries.push({ source, line, text, reason })
    this.#io.stderr.write(`threatfeed: ${source}:${line}: ${reason}: ${JSON.stringify(text)}\n`)
  }
}

/** Parses one input into a set, reporting refused lines under `source`. */
function readSet (bytes: Buffer, source: string, family: FamilyFilter, report: InvalidReport): NetworkSet {
  const builder = new NetworkSetBuilder(bytes.length >> 4, family === 'v4' ? 16 : bytes.length >> 5)
  // Offsets are byte offsets: a refused line is shown decoded as UTF-8.
  scanLines(bytes, builder, (line, start, end) => {
    report.add(source, line, bytes.toString('utf8', start, end))
  }, family)
  return builder.build()
}

/**
 * All of a stream as one Buffer. Unlike readAll (command.ts), a single chunk — stdin read from a
 * file (process-io.ts) — is returned as is: joining would copy the whole input once more.
 */
async function readInput (stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const c of stream) chunks.push(typeof c === 'string' ? Buffer.from(c) : c as Buffer)
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
}

/** Resolves once the bytes are written. A write error is the process's to report (process-io.ts). */
function writeBytes (out: Writable, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve) => { out.write(bytes, () => resolve()) })
}

async function run (args: string[], io: CliIo): Promise<number> {
  const { values } = parseOptions(args, {
    family: { type: 'string' },
    subtract: { type: 'string' },
    'skip-invalid': { type: 'boolean' },
  })
  if (values.help === true) return writeHelp(io, help)
  const family = (values.family ?? 'both') as FamilyFilter
  if (!FAMILIES.includes(family)) throw new CliError('--family must be v4, v6 or both')
  const skipInvalid = values['skip-invalid'] === true
  const json = values.json === true
  const report = new InvalidReport(io)

  let subtrahend: Buffer | undefined
  if (values.subtract !== undefined) {
    try {
      subtrahend = await readFile(values.subtract)
    } catch (e) {
      throw new CliError(`cannot read --subtract file ${values.subtract}: ${(e as Error).message}`, 1)
    }
  }
  let set = readSet(await readInput(io.stdin), 'stdin', family, report)
  if (subtrahend !== undefined) set = set.subtract(readSet(subtrahend, values.subtract!, family, report))

  if (report.count > MAX_REPORTED) io.stderr.write(`threatfeed: … and ${report.count - MAX_REPORTED} more invalid lines\n`)
  const failed = report.count > 0 && !skipInvalid
  if (report.count > 0) {
    io.stderr.write(failed
      ? `threatfeed: ${report.count} invalid ${plural(report.count)}; nothing written (--skip-invalid coalesces the valid ones)\n`
      : `threatfeed: skipped ${report.count} invalid ${plural(report.count)}\n`)
  }
  if (json) {
    const networks = failed ? [] : linesOf(set.toLines(family))
    writeJson(io, { ok: !failed, count: networks.length, networks, invalid: report.entries, invalidCount: report.count })
  } else if (!failed) {
    const bytes = set.toBytes(family)
    if (bytes.length > 0) await writeBytes(io.stdout, bytes)
  }
  return failed ? 1 : 0
}

function plural (n: number): string {
  return n === 1 ? 'line' : 'lines'
}

function linesOf (text: string): string[] {
  return text === '' ? [] : text.slice(0, -1).split('\n')
}

/**
 * @example
 *   // printf '10.0.0.0/25\n10.0.0.128/25\n' | threatfeed coalesce
 *   // 10.0.0.0/24
 */
export const coalesceCommand: Command = {
  name: 'coalesce',
  help,
  run,
}
