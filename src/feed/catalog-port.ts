/**
 * The catalog on other threads (the HTTPS front ends): one StoreCatalog polls the store in the
 * main thread, each thread holds a CatalogReplica fed over a MessagePort. A new view is posted as
 * soon as it is read, so a key revoked in the store is refused on every thread one poll interval
 * (THREATFEED_POLL_MS) and one message after the revoke — within DECISIONS §1's 1 s.
 *
 *   main: StoreCatalog ──onChange──► port.postMessage({ view })  ──►  thread: CatalogReplica.view
 *         refresh(force) ◄──────────── { refresh, id, force } ◄──────  replica.refresh() (an unknown key)
 *                         ──────────► { refreshed, id, error? } ──►  resolves after the view it caused
 *
 * A refresh's reply is posted after the view it read: a port delivers in order, so the replica has
 * the new view when its refresh() resolves (authenticateFresh then answers from it).
 */
import type { MessagePort } from 'node:worker_threads'
import { isThreatfeedError, ThreatfeedError } from '../errors.js'
import { CatalogView, type CatalogData, type CatalogReader, type StoreCatalog } from './catalog.js'

type ToReplica =
  | { readonly type: 'view', readonly data: CatalogData }
  | { readonly type: 'refreshed', readonly id: number, readonly error?: { readonly code: string | null, readonly message: string } }

interface ToCatalog { readonly type: 'refresh', readonly id: number, readonly force: boolean }

/**
 * Serves `catalog` to the replica at the other end of `port`: its current view at once, each new
 * one after, and the replica's refresh requests. Returns the function that stops serving.
 *
 * @example
 *   const { port1, port2 } = new MessageChannel()
 *   shareCatalog(catalog, port1)
 *   new Worker(entry, { workerData: { catalog: port2 }, transferList: [port2] })
 */
export function shareCatalog (catalog: Pick<StoreCatalog, 'view' | 'onChange' | 'refresh'>, port: MessagePort): () => void {
  const post = (message: ToReplica): void => { port.postMessage(message) }
  if (catalog.view !== null) post({ type: 'view', data: catalog.view.data })
  const unsubscribe = catalog.onChange((view) => { post({ type: 'view', data: view.data }) })
  port.on('message', (m: ToCatalog) => {
    if (m.type !== 'refresh') return
    catalog.refresh(m.force).then(
      () => { post({ type: 'refreshed', id: m.id }) },
      (e: unknown) => { post({ type: 'refreshed', id: m.id, error: { code: isThreatfeedError(e) ? e.code : null, message: (e as Error).message } }) },
    )
  })
  return () => {
    unsubscribe()
    port.close()
  }
}

/** The catalog as a thread sees it: the view last posted by shareCatalog. */
export class CatalogReplica implements CatalogReader {
  readonly #port: MessagePort
  readonly #pending = new Map<number, { resolve: () => void, reject: (e: unknown) => void }>()
  #view: CatalogView | null = null
  #nextId = 0
  readonly #loaded: Promise<void>
  #onLoaded: () => void = () => {}

  constructor (port: MessagePort) {
    this.#port = port
    this.#loaded = new Promise((resolve) => { this.#onLoaded = resolve })
    port.on('message', (m: ToReplica) => {
      if (m.type === 'view') {
        this.#view = new CatalogView(m.data)
        this.#onLoaded()
        return
      }
      const waiter = this.#pending.get(m.id)
      if (waiter === undefined) return
      this.#pending.delete(m.id)
      if (m.error === undefined) waiter.resolve()
      // An error's class does not cross threads; its registry code does.
      else waiter.reject(m.error.code === null ? new Error(m.error.message) : new ThreatfeedError(m.error.code as ThreatfeedError['code'], [], { cause: m.error.message }))
    })
  }

  get view (): CatalogView | null {
    return this.#view
  }

  /** Settles when the first view has arrived: a thread answers no request before (every key would be unknown). */
  loaded (): Promise<void> {
    return this.#loaded
  }

  refresh (force = false): Promise<void> {
    const id = this.#nextId++
    return new Promise<void>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject })
      this.#port.postMessage({ type: 'refresh', id, force } satisfies ToCatalog)
    })
  }

  /** Stops listening (the thread can then exit); refreshes still waiting reject. */
  close (): void {
    this.#port.close()
    for (const waiter of this.#pending.values()) waiter.reject(new ThreatfeedError('TF_ERR_STORE_UNAVAILABLE', [], { cause: 'catalog replica closed' }))
    this.#pending.clear()
  }
}
