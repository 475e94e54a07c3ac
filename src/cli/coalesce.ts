/**
 * `threatfeed coalesce`: addresses, CIDRs and ranges on stdin → the minimal sorted CIDR list on
 * stdout. The general-purpose face of src/net (no /8 or /12 target floors here), and a benchmark
 * of it: stdin is read in chunks of one reused buffer, parsed in place with char codes,
 * radix-sorted and written back in chunks (bench/coalesce.ts races it against iprange and Python).
 */
import { closeSync, fstatSync, openSync } from 'node:fs'
import type { Writable } from 'node:stream'
import { CliError, parseOptions, writeHelp, writeJson, type CliIo, type Command } from './command.js'
import { explainInvalid } from '../net/explain.js'
import { NetworkSetBuilder, type FamilyFilter, type NetworkSet } from '../net/network-set.js'
import { LineScanner } from '../net/scan-lines.js'
import { forEachChunk, knownSize, readFileChunks } from './process-io.js'

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

/** A builder sized for an input of `bytes` bytes (~16 bytes per IPv4 line, ~32 per IPv6 one). */
function builderFor (bytes: number | undefined, family: FamilyFilter): NetworkSetBuilder {
  if (bytes === undefined) return new NetworkSetBuilder()
  return new NetworkSetBuilder(family === 'v6' ? 16 : bytes >> 4, family === 'v4' ? 16 : bytes >> 5)
}

/**
 * Parses one input, chunk by chunk, into a set, reporting refused lines under `source`. The
 * chunks may share one buffer (process-io.ts), so a refused line is decoded (as UTF-8, from byte
 * offsets) while its chunk is current.
 */
async function readSet (each: (fn: (chunk: Uint8Array) => void) => Promise<void> | void, size: number | undefined, source: string, family: FamilyFilter, report: InvalidReport): Promise<NetworkSet> {
  const builder = builderFor(size, family)
  const scanner = new LineScanner(builder, (line, start, end, bytes) => {
    report.add(source, line, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8', start, end))
  }, family)
  await each((chunk) => { scanner.push(chunk) })
  scanner.end()
  return builder.build()
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

  let subtrahend: number | undefined
  if (values.subtract !== undefined) {
    try {
      subtrahend = openSync(values.subtract, 'r')
    } catch (e) {
      throw new CliError(`cannot read --subtract file ${values.subtract}: ${(e as Error).message}`, 1)
    }
  }
  let set: NetworkSet
  try {
    set = await readSet((fn) => forEachChunk(io.stdin, fn), knownSize(io.stdin), 'stdin', family, report)
    if (subtrahend !== undefined) {
      const fd = subtrahend
      const rest = await readSet((fn) => { readFileChunks(fd, fn) }, fstatSync(fd).size, values.subtract!, family, report)
      set = set.subtract(rest)
    }
  } catch (e) {
    if (subtrahend !== undefined && (e as NodeJS.ErrnoException).syscall === 'read') throw new CliError(`cannot read --subtract file ${values.subtract}: ${(e as Error).message}`, 1)
    throw e
  } finally {
    if (subtrahend !== undefined) closeSync(subtrahend)
  }

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
    // Chunks share one buffer, free again once written: only the process's own stdout is done
    // with a chunk by its callback; another Writable (a test's, a concat stream) may keep it.
    const own = io.stdout === process.stdout
    await set.writeText(family, (bytes) => writeBytes(io.stdout, own ? bytes : Uint8Array.prototype.slice.call(bytes)))
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
