/**
 * What an apply pass of random targets costs in LMDB, by layout (bench/NOTES.md, "Consumer:
 * arrival order"): records keyed by their target (the layout before format 5), against records in
 * arrival order whose target → key identity is held in memory (format 5). A table of `rules`
 * random /32s is filled first; then passes of `pass` new random targets, each one synchronous,
 * flushed transaction, layouts alternating. Reports the pages written per entry (this process's
 * write() bytes from /proc/self/io ÷ 4096: every dirtied page is written once per commit), the
 * CPU per entry and the median wall time of a pass.
 *
 * Usage: node --import=tsx bench/ingest/apply-layout.ts [rules = 1000000] [pass = 4000]
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { open, TransactionFlags } from 'lmdb'

const RULES = Number(process.argv[2] ?? 1_000_000)
const PASS = Number(process.argv[3] ?? 4000)
const PASSES = 10
/** Flushed commits, as the store's; the fill is not flushed (it only has to be there). */
const SYNCED = TransactionFlags.ABORTABLE | TransactionFlags.SYNCHRONOUS_COMMIT
const FILL = SYNCED | TransactionFlags.NO_SYNC_FLUSH

const dir = mkdtempSync(join(tmpdir(), 'tf-apply-layout-'))
const root = open({ path: dir, noSubdir: false, maxDbs: 4, mapSize: 2 ** 38, overlappingSync: false })
const byTarget = root.openDB<Buffer, Buffer>({ name: 'by-target', encoding: 'binary', keyEncoding: 'binary' })
const byArrival = root.openDB<Buffer, Buffer>({ name: 'by-arrival', encoding: 'binary', keyEncoding: 'binary' })
const WS = '6f1c2d3e-0000-4000-8000-123456789abc\u001f'
/** About the size of a stored v1 rule (rule-codec.ts). */
const VALUE = Buffer.alloc(96, 7)
const identity = new Map<string, number>()
let arrivals = 0

const written = (): number => Number(/wchar: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))![1])
const octet = (n: number): number => Math.floor(Math.random() * n)
const randomTarget = (): string => `${11 + octet(64)}.${octet(256)}.${octet(256)}.${octet(128) * 2}/32`
const targetKey = (t: string): Buffer => Buffer.from(WS + 't\u001fip\u001f' + t)
function arrivalKey (n: number): Buffer {
  const b = Buffer.alloc(WS.length + 8)
  b.write(WS, 'latin1')
  b.writeBigUInt64BE(BigInt(n), WS.length)
  return b
}
function putArrival (t: string): void {
  const prev = identity.get(t)
  if (prev !== undefined) byArrival.removeSync(arrivalKey(prev))
  identity.set(t, ++arrivals)
  byArrival.putSync(arrivalKey(arrivals), VALUE)
}

for (let done = 0; done < RULES; done += 20_000) {
  root.transactionSync(() => {
    for (let i = 0; i < 20_000; i++) {
      const t = randomTarget()
      byTarget.putSync(targetKey(t), VALUE)
      putArrival(t)
    }
  }, FILL)
}
// One flushed commit writes out the fill before the measured passes.
root.transactionSync(() => { byTarget.putSync(targetKey('0.0.0.0/32'), VALUE) }, SYNCED)
for (let round = 0; round < 2; round++) {
  for (const layout of ['by target', 'arrival order'] as const) {
    const wall: number[] = []
    const cpu = process.cpuUsage()
    const before = written()
    for (let p = 0; p < PASSES; p++) {
      const targets = Array.from({ length: PASS }, randomTarget)
      const t0 = performance.now()
      root.transactionSync(() => {
        if (layout === 'by target') for (const t of targets) byTarget.putSync(targetKey(t), VALUE, { noOverwrite: true })
        else for (const t of targets) putArrival(t)
      }, SYNCED)
      wall.push(performance.now() - t0)
    }
    const used = process.cpuUsage(cpu)
    wall.sort((a, b) => a - b)
    process.stdout.write(`${layout.padEnd(14)} pages written per entry ${((written() - before) / 4096 / PASSES / PASS).toFixed(3)}  CPU µs per entry ${((used.user + used.system) / PASSES / PASS).toFixed(1)}  median ms per pass ${wall[PASSES >> 1]!.toFixed(0)}\n`)
  }
}
await root.close()
rmSync(dir, { recursive: true, force: true })
