/**
 * Freed pages are reused: rules deleted and inserted again in cycles, through the store API, in
 * one long-lived process (as the server is), leave the data file at the size of the first cycles.
 * A read transaction left open would pin every page freed after it and make the file grow by a
 * cycle's worth each time.
 */
import t from 'tap'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openEmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { rule } from '../feed/fixtures.js'

t.test('the data file stops growing when rules are deleted and re-inserted in cycles', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-reuse-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // Page reuse, not the change log's retention (a deleted rule's entry is kept 10 minutes, then
  // trimmed: test/store/embedded/change-log.test.ts): here entries go at the next write.
  const store = await openEmbeddedStore(dir, { changesKeptMs: 0 })
  t.teardown(() => store.close())
  const ws = await store.workspaces.create({ name: 'acme', subscription: 'active' })
  const sizes: number[] = []
  for (let cycle = 0; cycle < 8; cycle++) {
    const ips = Array.from({ length: 5000 }, (_, i) => `10.${cycle}.${i >> 8}.${i & 255}/32`)
    for (let i = 0; i < ips.length; i += 500) await Promise.all(ips.slice(i, i + 500).map((ip) => store.rules.upsertAccessRule(rule(ws.id, ip))))
    // Reads between the writes, as the feed side does: they must not pin pages.
    t.equal((await store.rules.listAccessRules(ws.id, Date.now())).length, ips.length)
    for (let i = 0; i < ips.length; i += 500) await Promise.all(ips.slice(i, i + 500).map((ip) => store.rules.deleteAccessByTarget(ws.id, { type: 'ip', value: ip })))
    sizes.push(statSync(join(dir, 'data.mdb')).size)
  }
  t.ok(sizes.at(-1)! <= sizes[2]! * 1.05, `the file stopped growing after the first cycles: ${sizes.join(', ')} bytes`)
})
