/**
 * The tracker's per-poll bookkeeping for a known consumer (issue 32 item 3): ConsumerTracker#count
 * called for one consumer many times, its time per call and the young-generation collections it
 * causes (none: nothing allocated per poll). The address key is 192.0.2.7 as consumer-address.ts
 * makes it: a signed int32, a small integer to V8 (as an unsigned number it was a heap number,
 * boxed on every poll: 78 scavenges per 20 M calls).
 *
 * Usage: node --import=tsx bench/consumer-count.ts
 */
import { PerformanceObserver, performance, type PerformanceEntry } from 'node:perf_hooks'
import { ConsumerTracker, type PollFacts } from '../src/http/consumers.js'
import type { Logger } from '../src/log.js'
import type { Store } from '../src/store/types.js'

const store = { consumers: { merge: async () => {}, trim: async () => 0 } } as unknown as Store
const log = { warn: () => {}, info: () => {} } as unknown as Logger
const tracker = new ConsumerTracker({ store, log, staleMs: 900_000 })
const facts: PollFacts = {
  workspaceId: 'w', keyId: 'k', address: 0xc0000207 | 0, userAgent: 'PAN-OS/10.2', client: '', listRef: '*',
  variant: { key: 'plain|both|block|', params: { family: 'both', action: 'block' } } as never, at: Date.now(),
}
let scavenges = 0
new PerformanceObserver((list) => { for (const e of list.getEntries()) if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === 1) scavenges++ }).observe({ entryTypes: ['gc'] })
const N = 20_000_000
for (let round = 0; round < 3; round++) {
  const before = scavenges
  const t0 = performance.now()
  for (let i = 0; i < N; i++) {
    facts.at++
    tracker.count(facts, 304, '"plain.both.block.identity.aa"', 1)
  }
  const ns = (performance.now() - t0) * 1e6 / N
  await new Promise((resolve) => setTimeout(resolve, 50))
  process.stdout.write(`round ${round}: ${ns.toFixed(1)} ns per count(), ${scavenges - before} scavenges over ${N / 1e6} M polls\n`)
}
