/**
 * The consumer tracker's own memory (issue 35 item 2): one key flooded with distinct consumers
 * of the largest identity a request can give (a 4 KB two-byte User-Agent, cut to 256; an IPv6
 * address; a 64-character `?client=`), V8 heap in use after full collections at growing flood
 * sizes. What the server's RSS adds beyond this is traffic garbage (bench/consumer-flood.ts).
 *
 * Usage: node --expose-gc --import=tsx bench/consumer-memory.ts
 */
import { ConsumerTracker } from '../src/http/consumers.js'
import { DEFAULT_CONSUMERS_PER_KEY } from '../src/store/consumer-record.js'
import type { Store } from '../src/store/types.js'
import type { Logger } from '../src/log.js'

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')
const store = { consumers: { merge: async () => {}, trim: async () => 0, list: async () => [], forget: async () => 0 } } as unknown as Store
const log = { warn: () => {}, info: () => {} } as unknown as Logger
const heapMiB = (): number => {
  gc()
  gc()
  return process.memoryUsage().heapUsed / 1048576
}

const tracker = new ConsumerTracker({ store, log, staleMs: 900_000 })
const variant = { key: 'plain|both|block|md5', params: { family: 'both', action: 'block' } } as never
const start = heapMiB()
let n = 0
process.stdout.write(`per-key bound ${DEFAULT_CONSUMERS_PER_KEY}; heap at start ${start.toFixed(1)} MiB\n`)
for (const total of [DEFAULT_CONSUMERS_PER_KEY, 30_000, 90_000, 180_000]) {
  for (; n < total; n++) {
    const userAgent = String(n).padStart(8, '0') + '\u00e9'.repeat(4088)
    const address = `2001:db8:${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}::${(n % 7).toString(16)}`
    tracker.count({ workspaceId: 'w', keyId: 'k', address, userAgent, client: 'c'.repeat(56) + String(n).padStart(8, '0'), listRef: '*', variant, at: Date.now() }, 304, '"e"', 1)
    if (n % 5000 === 0) await tracker.flush()
  }
  await tracker.flush()
  const used = heapMiB() - start
  process.stdout.write(`${total} distinct consumers polled: ${tracker.size} tracked, heap +${used.toFixed(2)} MiB (${(used * 1048576 / tracker.size).toFixed(0)} B per tracked consumer)\n`)
}
