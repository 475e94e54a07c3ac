/**
 * Backup and compaction of the embedded store (maintenance.ts at the store root has the contract).
 *
 * A data directory holds two LMDB environments (lmdb-env.ts): the main one (`data.mdb`: rules,
 * admin records, consumer checkpoints) and the stream's (`stream/data.mdb`). LMDB copies one
 * environment consistently (mdb_env_copy2 reads it in one read transaction while writers go on);
 * nothing copies two at one instant, so the backup orders the two copies instead — see backup().
 * The lock files are never copied: a lock file is per running set of processes, and the first
 * process to open a directory rebuilds its own.
 */
import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { ThreatfeedError } from '../../errors.js'
import type { BackupReport, CompactReport, StatsReport, StoreFile, StoreMaintenance } from '../maintenance.js'
import { newHousekeepingCounters } from '../types.js'
import { STREAM_DIR } from './layout.js'
import { LmdbEnv } from './lmdb-env.js'
import { EmbeddedSignalStream } from './signal-stream.js'

const DATA_FILE = 'data.mdb'
const LOCK_FILE = 'lock.mdb'
/** The data files of a directory, relative to it. */
const DATA_FILES = [DATA_FILE, join(STREAM_DIR, DATA_FILE)] as const
/** A copy whose check fails is taken again this many times (see backup()). */
const BACKUP_ATTEMPTS = 3

export class EmbeddedMaintenance implements StoreMaintenance {
  readonly #dataDir: string

  constructor (dataDir: string) {
    this.#dataDir = resolve(dataDir)
  }

  async stats (): Promise<StatsReport> {
    this.#requireStore()
    const env = new LmdbEnv(this.#dataDir)
    try {
      return { dataDir: this.#dataDir, files: env.stats() }
    } finally {
      await env.close()
    }
  }

  /**
   * The main environment is copied FIRST, the stream second. A consumer's checkpoint (main) only
   * ever names records already in the stream, and the stream only grows at its head, so a stream
   * copied after the checkpoints holds every record they name and every record after them: the
   * restored consumer replays from its checkpoint what the copied rules lack. The other order
   * could copy a checkpoint past the copied stream's head — rules ahead of their stream — and the
   * restored server would give the next signals seqs its consumer counts as applied, skipping
   * them. The stream being ahead is harmless: the restored consumer applies the records
   * acknowledged after the main copy, as it would after a crash. The copy is then checked: every
   * checkpoint is at or below the head, and the record after it is still there (a trim of the
   * stream between the two copies could have removed records the older checkpoint still needs);
   * a failed check takes the copy again. The copies are plain, free pages included: LMDB's
   * compacting copy broke later writes (lmdb-env.ts, rewriteTo).
   */
  async backup (outDir: string): Promise<BackupReport> {
    this.#requireStore()
    const out = resolve(outDir)
    if (existsSync(out) && readdirSync(out).length > 0) throw new ThreatfeedError('TF_ERR_INVALID_ARGUMENT', [`${out} is not empty; back up into a new directory`])
    let problem = ''
    for (let attempt = 0; attempt < BACKUP_ATTEMPTS; attempt++) {
      rmSync(out, { recursive: true, force: true })
      const env = new LmdbEnv(this.#dataDir)
      try {
        await env.copyMain(out, false)
        await env.copyStream(join(out, STREAM_DIR), false)
      } finally {
        await env.close()
      }
      const checked = await checkCopy(out)
      removeLockFiles(out)
      if (typeof checked !== 'string') return { out, files: dataFiles(out), ...checked }
      problem = checked
    }
    rmSync(out, { recursive: true, force: true })
    throw new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: new Error(`no consistent copy in ${BACKUP_ATTEMPTS} attempts: ${problem}`) })
  }

  /**
   * Compacting copies of both environments (lmdb-env.ts, rewriteTo) are written beside the
   * originals and renamed over them. Only while no other process has the store open: LMDB's reader table (lmdb-env.ts,
   * otherProcesses) is checked before the copy and again right before the swap. It is a check,
   * not a lock — a process that opens the directory in the instant between the last check and
   * the rename would keep the old files — so the README says to stop the server first.
   */
  async compact (): Promise<CompactReport> {
    this.#requireStore()
    const dir = this.#dataDir
    const before = totalBytes(dataFiles(dir))
    const env = new LmdbEnv(dir)
    let tmp: string | null = null
    try {
      refuseWhenShared(env, dir)
      tmp = mkdtempSync(join(dir, '.compact-'))
      await env.rewriteTo(tmp)
      refuseWhenShared(env, dir)
    } catch (e) {
      await env.close()
      if (tmp !== null) rmSync(tmp, { recursive: true, force: true })
      throw e
    }
    await env.close()
    // Each rename is atomic; between the two the directory holds a compacted main environment
    // and the original stream, which is the same content (nothing wrote meanwhile).
    for (const f of DATA_FILES) renameSync(join(tmp, f), join(dir, f))
    rmSync(tmp, { recursive: true, force: true })
    return { dataDir: dir, before, after: totalBytes(dataFiles(dir)) }
  }

  #requireStore (): void {
    if (!existsSync(join(this.#dataDir, DATA_FILE))) throw new ThreatfeedError('TF_ERR_INVALID_ARGUMENT', [`no embedded store in ${this.#dataDir} (THREATFEED_DATA_DIR)`])
  }
}

function refuseWhenShared (env: LmdbEnv, dir: string): void {
  const pids = env.otherProcesses()
  if (pids.length > 0) throw new ThreatfeedError('TF_ERR_STORE_CONFLICT', [`the store in ${dir} is open in process ${pids.join(', ')}; stop the server (and any other threatfeed command) before compacting`])
}

/** The copy's stream head and checkpoints, or what is wrong with it. */
async function checkCopy (out: string): Promise<Pick<BackupReport, 'streamHead' | 'checkpoints'> | string> {
  const env = new LmdbEnv(out)
  try {
    const stream = new EmbeddedSignalStream(env, newHousekeepingCounters())
    const streamHead = await stream.head()
    const checkpoints = env.read((dbs) => Object.fromEntries(Array.from(dbs.checkpoints.getRange({}), (e) => [e.key, e.value])))
    for (const [consumer, seq] of Object.entries(checkpoints)) {
      if (seq > streamHead) return `the checkpoint of ${consumer} (${seq}) is past the stream head (${streamHead})`
      if (seq < streamHead && (await stream.read(seq + 1, 1))[0]?.seq !== seq + 1) return `the stream no longer holds record ${seq + 1}, after the checkpoint of ${consumer}`
    }
    return { streamHead, checkpoints }
  } finally {
    await env.close()
  }
}

function removeLockFiles (dir: string): void {
  for (const f of [LOCK_FILE, join(STREAM_DIR, LOCK_FILE)]) rmSync(join(dir, f), { force: true })
}

function dataFiles (dir: string): StoreFile[] {
  return DATA_FILES.filter((f) => existsSync(join(dir, f))).map((path) => ({ path, bytes: statSync(join(dir, path)).size }))
}

function totalBytes (files: readonly StoreFile[]): number {
  return files.reduce((n, f) => n + f.bytes, 0)
}
