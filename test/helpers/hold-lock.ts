/**
 * A second process holding one of the embedded store's LMDB write locks, for tests that provoke a
 * lock wait for real (another node's apply, a CLI write). A test file runs itself as the child
 * (`<file> --hold …`) and calls this there: it opens the store's environments as the server does,
 * prints `ready`, waits for `lockFile` (when given), takes the write lock, prints `locked`, keeps it
 * until `releaseFile` appears, then prints `released`.
 *
 * @example
 *   if (process.argv[2] === '--hold') await holdWriteLock('main', process.argv[3]!, process.argv[4]!)
 */
import { existsSync } from 'node:fs'

export async function holdWriteLock (which: 'main' | 'stream', dataDir: string, releaseFile: string, lockFile?: string): Promise<void> {
  const { LmdbEnv } = await import('../../src/store/embedded/lmdb-env.js')
  // syncWrites: the transaction runs in this call, on this thread, and keeps the lock until it returns.
  const env = new LmdbEnv(dataDir, { syncWrites: true })
  const pause = new Int32Array(new SharedArrayBuffer(4))
  const waitFor = (file: string): void => { while (!existsSync(file)) Atomics.wait(pause, 0, 0, 10) }
  process.stdout.write('ready\n')
  if (lockFile !== undefined) waitFor(lockFile)
  const held = (): void => {
    process.stdout.write('locked\n')
    waitFor(releaseFile)
  }
  await (which === 'main' ? env.write(held) : env.writeStream(held))
  await env.close()
  process.stdout.write('released\n')
}
