import { copyFileSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import type { ThreatfeedError } from '../../src/errors.js'
import type { GeoIndex } from '../../src/geo/geo-index.js'
import { loadGeoIndex } from '../../src/geo/load.js'
import { watchGeo } from '../../src/geo/watch.js'
import { maxmind } from './fixtures.js'

type Event = { kind: 'reload', index: GeoIndex } | { kind: 'error', err: ThreatfeedError }

/** Collects watcher events and lets the test wait for the next one. */
function recorder () {
  const queue: Event[] = []
  let wake: (() => void) | undefined
  const push = (e: Event): void => { queue.push(e); wake?.() }
  return {
    onReload: (index: GeoIndex) => push({ kind: 'reload', index }),
    onError: (err: ThreatfeedError) => push({ kind: 'error', err }),
    async next (ms = 5000): Promise<Event> {
      const deadline = Date.now() + ms
      while (queue.length === 0) {
        if (Date.now() > deadline) throw new Error('no watcher event in time')
        await new Promise<void>((resolve) => { wake = resolve; setTimeout(resolve, 50) })
      }
      return queue.shift()!
    },
    get pending (): number { return queue.length },
  }
}

/** Replaces a file the way deployments do: write beside it, then rename over it. */
function replace (path: string, from: string | Buffer): void {
  const tmp = path + '.new'
  if (typeof from === 'string') copyFileSync(from, tmp)
  else writeFileSync(tmp, from)
  renameSync(tmp, path)
}

t.test('a broken replacement keeps the previous index and reports; a good one reloads', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-geo-watch-'))
  const countryDb = join(dir, 'country.mmdb')
  copyFileSync(maxmind('GeoLite2-Country-Test.mmdb'), countryDb)
  let current = await loadGeoIndex({ countryDb })
  const before = Array.from(current.expandCountry('GB').v4)
  const rec = recorder()
  const w = watchGeo({ countryDb }, (index) => { current = index; rec.onReload(index) }, rec.onError, { debounceMs: 50, pollMs: 300 })
  t.teardown(() => { w.close(); rmSync(dir, { recursive: true, force: true }) })
  await new Promise((resolve) => setTimeout(resolve, 100)) // let the watcher take its first look

  replace(countryDb, maxmind('MaxMind-DB-test-broken-search-tree-24.mmdb'))
  const e1 = await rec.next()
  t.equal(e1.kind, 'error', 'a broken file is reported')
  if (e1.kind === 'error') {
    t.equal(e1.err.code, 'TF_ERR_GEO_LOAD')
    t.match(e1.err.message, `cannot load geo database ${countryDb}: `)
  }
  t.same(Array.from(current.expandCountry('GB').v4), before, 'the previous index stays in use')

  replace(countryDb, maxmind('GeoIP2-Country-Test.mmdb'))
  const e2 = await rec.next()
  t.equal(e2.kind, 'reload', 'a good file reloads')
  t.equal(current.sources[0]?.databaseType, 'GeoIP2-Country', 'the new database is in use')

  rmSync(countryDb)
  const e3 = await rec.next()
  t.equal(e3.kind, 'error', 'a vanished file is reported')
  if (e3.kind === 'error') t.match(e3.err.message, /file not found/)
  t.equal(current.sources[0]?.databaseType, 'GeoIP2-Country', 'and the index stays')

  copyFileSync(maxmind('GeoLite2-Country-Test.mmdb'), countryDb)
  const e4 = await rec.next()
  t.equal(e4.kind, 'reload', 'it comes back when the file does')
  t.equal(current.sources[0]?.databaseType, 'GeoLite2-Country')

  // Nothing changes: no more events (the broken file is not retried on every poll either).
  await new Promise((resolve) => setTimeout(resolve, 800))
  t.equal(rec.pending, 0, 'quiet while nothing changes')
})

t.test('a custom loader is used, and close() stops everything', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tf-geo-watch-'))
  const asnDb = join(dir, 'asn.mmdb')
  copyFileSync(maxmind('GeoLite2-ASN-Test.mmdb'), asnDb)
  const rec = recorder()
  let loads = 0
  const w = watchGeo({ asnDb }, rec.onReload, rec.onError, {
    debounceMs: 20,
    pollMs: 0,
    load: async (paths) => { loads++; return loadGeoIndex(paths) },
  })
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  await new Promise((resolve) => setTimeout(resolve, 100))
  replace(asnDb, maxmind('GeoLite2-ASN-Test.mmdb'))
  t.equal((await rec.next()).kind, 'reload')
  t.equal(loads, 1)
  w.close()
  replace(asnDb, maxmind('GeoLite2-Country-Test.mmdb'))
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.equal(rec.pending, 0, 'no event after close')
})
