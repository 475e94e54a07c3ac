/**
 * Opens the configured store for one CLI command and closes it afterwards. Commands are short-lived
 * processes that share the store with a running server (LMDB is multi-process; MongoDB is a
 * server), so nothing here is cached.
 */
import { loadConfig, type Config } from '../config.js'
import { openStore, storeExists, type StoreOptions } from '../store/open.js'
import type { Store, Workspace } from '../store/types.js'
import { CliError, NotInStoreError, type CliIo } from './command.js'

/**
 * Runs `fn` on the configured store. Only `create` (workspace create, the first command of a new
 * installation) may create it: any other command run from the wrong directory, or with a
 * mistyped THREATFEED_DATA_DIR, would otherwise leave an empty store behind and answer as if it
 * were the server's (issue 36).
 */
export async function withStore<T> (io: CliIo, fn: (store: Store) => Promise<T>, options: { create?: boolean } = {}): Promise<T> {
  const config = loadConfig(io.env)
  const opts = storeOptions(config)
  if (options.create !== true && !storeExists(opts)) {
    throw new CliError(`no threatfeed store in ${config.dataDir} (THREATFEED_DATA_DIR${io.env.THREATFEED_DATA_DIR === undefined || io.env.THREATFEED_DATA_DIR === '' ? ' is not set: ./data of the current directory' : ''}); run this where the server keeps its data, or set THREATFEED_DATA_DIR`, 1)
  }
  const store = await openStore(opts)
  try {
    return await fn(store)
  } finally {
    await store.close()
  }
}

/** Where the configured store is, for messages: the data directory, or the MongoDB database (never its URI, which may hold a password). */
export function storeLocation (config: Config): string {
  return config.store === 'mongodb' ? `MongoDB database ${config.mongodbDb}` : `the store at ${config.dataDir}`
}

/** An empty listing, said on stderr with the store's place (stdout stays empty for a script). */
export function writeNoneFound (io: CliIo, what: string): void {
  io.stderr.write(`threatfeed: no ${what} in ${storeLocation(loadConfig(io.env))}\n`)
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
  if (w === null || w.deletedAt !== null) throw new NotInStoreError(`no workspace with id ${id}`)
  return w
}
