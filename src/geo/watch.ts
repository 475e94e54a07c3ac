/**
 * Reloads the geo index when a database file changes (DECISIONS §6: on reload the previous
 * database stays in use when the new one is bad).
 *
 * Change detection: fs.watch on each file's directory (files are usually replaced by rename, which
 * a watch on the file itself would miss), debounced so a file copied in place is read once it is
 * complete, plus a stat poll for file systems where fs.watch says nothing (NFS, some container
 * mounts). A change is a different (inode, size, mtime); a load that fails remembers the broken
 * file's signature too, so it is retried when the file changes again, not on every poll.
 */
import { watch, type FSWatcher } from 'node:fs'
import { stat } from 'node:fs/promises'
import { basename, dirname } from 'node:path'
import { toThreatfeedError, type ThreatfeedError } from '../errors.js'
import type { GeoIndex } from './geo-index.js'
import { loadGeoIndex, type GeoPaths } from './load.js'

export interface WatchGeoOptions {
  /** Quiet time after the last change event before reloading (default 250 ms). */
  debounceMs?: number
  /** Stat poll interval, 0 to disable (default 5000 ms). */
  pollMs?: number
  /** How to build the index (default loadGeoIndex); a pool can run it in a worker instead. */
  load?: (paths: GeoPaths) => Promise<GeoIndex>
}

export interface GeoWatcher {
  close (): void
}

/**
 * Watches the database files of `paths`. Call it right after the initial load: changes from then
 * on call `onReload` with a new index, or `onError` (TF_ERR_GEO_LOAD naming the file) and keep
 * quiet until the file changes again — the caller keeps serving the index it has.
 *
 * @example
 *   let index = await loadGeoIndex(paths)
 *   const w = watchGeo(paths, (next) => { index = next }, (err) => log.error(err))
 *   // later: w.close()
 */
export function watchGeo (paths: GeoPaths, onReload: (index: GeoIndex) => void, onError: (err: ThreatfeedError) => void, opts: WatchGeoOptions = {}): GeoWatcher {
  const files = [...new Set([paths.countryDb, paths.asnDb].filter((p): p is string => p !== undefined))]
  const debounceMs = opts.debounceMs ?? 250
  const pollMs = opts.pollMs ?? 5000
  const load = opts.load ?? loadGeoIndex
  const seen = new Map<string, string>()
  const watchers: FSWatcher[] = []
  let closed = false
  let timer: NodeJS.Timeout | undefined
  let running = false
  let again = false

  const schedule = (): void => {
    if (closed) return
    if (timer !== undefined) clearTimeout(timer)
    timer = setTimeout(() => { timer = undefined; void check() }, debounceMs)
    timer.unref()
  }

  // One check at a time; a change noticed meanwhile runs one more afterwards.
  const check = async (): Promise<void> => {
    if (running) { again = true; return }
    running = true
    try {
      do {
        again = false
        const now = await Promise.all(files.map(signature))
        if (closed || files.every((f, i) => seen.get(f) === now[i])) continue
        files.forEach((f, i) => seen.set(f, now[i]!))
        try {
          const index = await load(paths)
          if (!closed) onReload(index)
        } catch (e) {
          if (!closed) onError(toThreatfeedError(e))
        }
      } while (again && !closed)
    } finally {
      running = false
    }
  }

  const start = async (): Promise<void> => {
    const now = await Promise.all(files.map(signature))
    files.forEach((f, i) => seen.set(f, now[i]!))
    if (closed) return
    for (const dir of new Set(files.map((f) => dirname(f)))) {
      const names = new Set(files.filter((f) => dirname(f) === dir).map((f) => basename(f)))
      try {
        const w = watch(dir, { persistent: false }, (_event, name) => {
          // Some platforms give no name; then any event in the directory counts.
          if (name === null || names.has(name.toString())) schedule()
        })
        w.on('error', () => { /* the poll still covers this directory */ })
        watchers.push(w)
      } catch {
        // The directory may not exist yet; the poll notices the file when it appears.
      }
    }
    if (pollMs > 0) {
      poller = setInterval(() => { void check() }, pollMs)
      poller.unref()
    }
  }
  let poller: NodeJS.Timeout | undefined
  void start()

  return {
    close () {
      closed = true
      if (timer !== undefined) clearTimeout(timer)
      if (poller !== undefined) clearInterval(poller)
      for (const w of watchers) w.close()
    },
  }
}

/** Identity of a file's current content as far as stat can tell; "missing" when absent. */
async function signature (path: string): Promise<string> {
  try {
    const s = await stat(path, { bigint: true })
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}`
  } catch {
    return 'missing'
  }
}
