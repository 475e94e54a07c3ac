/**
 * Opens the configured store for one CLI command and closes it afterwards. Commands are short-lived
 * processes that share the store with a running server (LMDB is multi-process; MongoDB is a
 * server), so nothing here is cached.
 */
import { loadConfig, type Config } from '../config.js'
import { openStore, type StoreOptions } from '../store/open.js'
import type { Store, Workspace } from '../store/types.js'
import { CliError, type CliIo } from './command.js'

export async function withStore<T> (io: CliIo, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(storeOptions(loadConfig(io.env)))
  try {
    return await fn(store)
  } finally {
    await store.close()
  }
}

/** The configured store, as openStore and openMaintenance take it. */
export function storeOptions (config: Config): StoreOptions {
  return config.store === 'mongodb'
    ? { kind: 'mongodb', uri: config.mongodbUri!, dbName: config.mongodbDb }
    : { kind: 'embedded', dataDir: config.dataDir }
}

/** Text fields shown in feed headers must not carry control characters (DECISIONS §5). */
export function checkText (option: string, value: string, maxLength = 200): string {
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  if (/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(value)) throw new CliError(`--${option} must not contain control characters`)
  if (value.length > maxLength) throw new CliError(`--${option} must be at most ${maxLength} characters`)
  return value
}

/** The live workspace of that id, or a clear error (exit 1) naming it. */
export async function requireWorkspace (store: Store, id: string): Promise<Workspace> {
  const w = await store.workspaces.get(id)
  if (w === null || w.deletedAt !== null) throw new CliError(`no workspace with id ${id}`, 1)
  return w
}
