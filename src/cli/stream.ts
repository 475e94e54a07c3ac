/**
 * `threatfeed stream tail|status|forget`: the durable message stream of accepted signals (SPEC §6,
 * DECISIONS §3). A v1 record's payload is the entry's JSON text exactly as it was sent, and it has
 * no schema_version header; a v2 record carries schema_version 2 and the canonical envelope.
 */
import { CliError, writeJson, type CliIo, type Command, parseVerb } from './command.js'
import { withStore } from './open-store.js'
import { DEFAULT_CONSUMER } from '../stream/consumer.js'
import type { StreamRecord } from '../store/types.js'

const help = `Usage: threatfeed stream <tail|status|forget> [options]

  tail [--from SEQ] [--limit N] [--json]
        records with seq >= SEQ (default: the last N), at most N (default 100, at most 100000);
        a SEQ already trimmed is an error naming the first position still kept
        --json: one JSON array of {seq, workspace, schemaVersion?, batch?, acceptedAt, payload};
        schemaVersion is absent for v1 records, as on the stream; batch is the id of the
        signal batch that appended the record, as its 200/206 answer named it
  status [--json]
        the stream head, the rule consumer's checkpoint, every consumer's checkpoint and the
        positions still kept (the stream is trimmed to THREATFEED_STREAM_RETENTION, never past
        the lowest checkpoint) → {"head","checkpoint","lag","checkpoints":{NAME:SEQ},
        "retained":{"first","last","records","bytes"}}
  forget --consumer NAME [--force]
        removes a consumer's checkpoint, so that a consumer no longer run (an old node, a renamed
        consumer) stops holding back the trim; a consumer still running under NAME finds no
        checkpoint at its next apply and starts over from the first position kept. The server's
        own consumer, ${DEFAULT_CONSUMER}, is refused without --force: it would re-apply every record kept`

const options = {
  from: { type: 'string' },
  limit: { type: 'string' },
  consumer: { type: 'string' },
  force: { type: 'boolean' },
} as const

const MAX_LIMIT = 100_000

function wholeNumber (option: string, v: string | undefined, dflt: number, min: number, max: number): number {
  if (v === undefined) return dflt
  const n = /^\d+$/.test(v) ? Number(v) : NaN
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new CliError(`--${option} must be a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`)
  return n
}

/** The record as printed: schemaVersion only when the record has the header. */
export function showRecord (r: StreamRecord): Record<string, unknown> {
  const out: Record<string, unknown> = { seq: r.seq, workspace: r.workspaceId }
  if (r.schemaVersion !== undefined) out.schemaVersion = r.schemaVersion
  if (r.batchId !== undefined) out.batch = r.batchId
  out.acceptedAt = new Date(r.acceptedAt).toISOString()
  out.payload = r.payload
  return out
}

export const streamCommand: Command = {
  name: 'stream',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const parsed = parseVerb(args, io, help, options)
    if (parsed === null) return 0
    const { verb, values } = parsed
    const json = values.json === true
    switch (verb) {
      case 'tail': {
        const limit = wholeNumber('limit', values.limit, 100, 1, MAX_LIMIT)
        const records = await withStore(io, async (s) => {
          const { first } = await s.stream.retained()
          const from = values.from !== undefined
            ? wholeNumber('from', values.from, 1, 0, Number.MAX_SAFE_INTEGER)
            : Math.max(first, await s.stream.head() - limit + 1)
          const read = await s.stream.read(from, limit)
          // Seqs are contiguous: a first record past `from` means a trim got there first.
          const kept = Math.max(first, read[0] !== undefined && read[0].seq > from ? read[0].seq : 0)
          if (from < kept && kept > 1) throw new CliError(`stream position ${from} was trimmed; the first position still kept is ${kept}`, 1)
          return read
        })
        if (json) writeJson(io, records.map(showRecord))
        else {
          for (const r of records) {
            // A v1 payload keeps the sender's line breaks; escaped here so that a record stays one line.
            const payload = /[\r\n]/.test(r.payload) ? JSON.stringify(r.payload) : r.payload
            io.stdout.write(`${r.seq}  ${new Date(r.acceptedAt).toISOString()}  ${r.workspaceId}  ${r.schemaVersion === undefined ? '-' : `v${r.schemaVersion}`}  ${payload}\n`)
          }
        }
        return 0
      }
      case 'status': {
        const status = await withStore(io, async (s) => {
          const [head, checkpoint, checkpoints, retained] = await Promise.all([s.stream.head(), s.stream.getCheckpoint(DEFAULT_CONSUMER), s.stream.checkpoints(), s.stream.retained()])
          return { head, checkpoint, lag: head - checkpoint, checkpoints: Object.fromEntries(checkpoints.map((c) => [c.consumer, c.seq])), retained }
        })
        if (json) writeJson(io, status)
        else {
          const { retained: r } = status
          const kept = r.records > 0 ? `positions ${r.first}–${r.last} kept` : `nothing kept before ${r.first}`
          io.stdout.write(`head ${status.head}, applied up to ${status.checkpoint} (lag ${status.lag}); ${kept}: ${r.records} records, ${r.bytes} bytes\n`)
          const names = Object.entries(status.checkpoints).map(([name, seq]) => `${name} at ${seq}`)
          io.stdout.write(`checkpoints: ${names.length > 0 ? names.join(', ') : 'none'}\n`)
        }
        return 0
      }
      case 'forget': {
        const consumer = values.consumer
        if (consumer === undefined || consumer === '') throw new CliError('stream forget needs --consumer NAME; stream status lists the checkpoints')
        if (consumer === DEFAULT_CONSUMER && values.force !== true) {
          throw new CliError(`${JSON.stringify(consumer)} is the server's own consumer: without its checkpoint it re-applies every record kept; add --force to forget it anyway`)
        }
        await withStore(io, async (s) => {
          if (await s.stream.forgetCheckpoint(consumer)) return
          const names = (await s.stream.checkpoints()).map((c) => c.consumer)
          throw new CliError(`no checkpoint named ${JSON.stringify(consumer)}; stored: ${names.length > 0 ? names.map((n) => JSON.stringify(n)).join(', ') : 'none'}`, 1)
        })
        io.stdout.write(`forgot the checkpoint of ${JSON.stringify(consumer)}\n`)
        return 0
      }
      default:
        throw new CliError(`unknown stream command ${JSON.stringify(verb)}; see threatfeed stream --help`)
    }
  },
}
