/**
 * The listeners of one front end: the plain HTTP app (unless `PORT=off`) and the HTTPS listener
 * (when a certificate is configured), with every route registered on both. app.ts registers
 * through `route` and never creates an App itself; one instance per front-end thread.
 */
import { isMainThread } from 'node:worker_threads'
import type { HttpRequest, HttpResponse, ListenOptions, TemplatedApp, us_listen_socket } from 'uWebSockets.js'
import uWS from './uws.js'
import type { Config } from '../config.js'
import type { Logger } from '../log.js'
import { ThreatfeedError } from '../errors.js'
import { TlsListener, type RouteHandler } from './tls-listener.js'
import type { Method } from './app.js'
import { registerCertificateMetrics, type Metrics } from './metrics.js'
import { markForwarded, THREAD_TOKEN_HEADER } from './forward.js'

/**
 * The main thread listens on the public ports only when it is the one front end: then without
 * SO_REUSEPORT, so that no other process can join the port (listen-check.ts); front-end threads
 * share theirs.
 */
function listenOptions (): ListenOptions {
  // The enum is a type only: the library exports the values themselves (1 and the default 0).
  return (isMainThread ? (uWS as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT : 0) as ListenOptions
}

export class Listeners {
  readonly #config: Config
  readonly #log: Logger
  readonly #plain: TemplatedApp | null
  readonly #tls: TlsListener | null
  /** The main thread's loopback listener for requests the front-end threads forward (forward.ts). */
  readonly #internal: { readonly app: TemplatedApp, readonly token: string } | null
  #plainSocket: us_listen_socket | null = null
  #internalSocket: us_listen_socket | null = null
  /** The public ports are the front-end threads' alone (app.ts): this binds only the internal one. */
  #publicOnThreads = false

  private constructor (config: Config, log: Logger, tls: TlsListener | null, internalToken: string | null) {
    this.#config = config
    this.#log = log
    this.#plain = config.port === null ? null : uWS.App()
    this.#tls = tls
    this.#internal = internalToken === null ? null : { app: uWS.App(), token: internalToken }
  }

  /**
   * Opens the TLS listener's files first: a bad certificate or key stops the start here.
   * `metrics` null on a front-end thread (the main thread reports the certificates);
   * `internalToken` on the main thread of several front ends (front-threads.ts).
   */
  static async open (config: Config, log: Logger, metrics: Metrics | null, internalToken: string | null = null): Promise<Listeners> {
    const tls = config.tls === null ? null : await TlsListener.open(config.tls, { log })
    if (tls !== null && metrics !== null) registerCertificateMetrics(metrics, () => tls.certificates())
    return new Listeners(config, log, tls, internalToken)
  }

  route (method: Method, pattern: string, handler: RouteHandler): void {
    this.#plain?.[method](pattern, (res: HttpResponse, req: HttpRequest) => { handler(res, req, null) })
    this.#tls?.route(method, pattern, handler)
    const internal = this.#internal
    if (internal !== null) {
      internal.app[method](pattern, (res: HttpResponse, req: HttpRequest) => {
        // Only a front-end thread of this process knows the token; anyone else on the host is refused.
        if (req.getHeader(THREAD_TOKEN_HEADER) !== internal.token) {
          res.writeStatus('403 Forbidden').end('', true)
          return
        }
        markForwarded(res)
        handler(res, req, null)
      })
    }
  }

  /** The internal listener's port (null without one, or before listen). */
  get internalPort (): number | null {
    return this.#internalSocket === null ? null : uWS.us_socket_local_port(this.#internalSocket)
  }

  /**
   * With front-end threads, the main thread holds the rule caches and runs the rebuilds: its
   * collector and its longer turns would stall the polls it took (bench/bigws). So the public
   * ports are left to the threads (`config` holds them already chosen, front-threads.ts
   * sharedPorts), listen() binds only the internal listener, and announce() logs the ports once
   * the threads listen.
   */
  leavePublicPortsToThreads (): void {
    this.#publicOnThreads = true
  }

  /** Binds every listener; the ports bound (null for a listener that is off). */
  async listen (): Promise<{ port: number | null, tlsPort: number | null }> {
    const { host, port } = this.#config
    let bound: number | null = null
    if (this.#publicOnThreads) {
      await this.#listenInternal()
      this.#tls?.watch()
      return { port: this.#plain === null ? null : port, tlsPort: this.#tls === null ? null : this.#config.tls!.port }
    }
    if (this.#plain !== null && port !== null) {
      const plain = this.#plain
      this.#plainSocket = await new Promise<us_listen_socket>((resolve, reject) => {
        plain.listen(host, port, listenOptions(), (s) => {
          if (s === false) reject(new ThreatfeedError('TF_ERR_CONFIG', [`cannot listen on ${host}:${port}`]))
          else resolve(s)
        })
      })
      bound = uWS.us_socket_local_port(this.#plainSocket)
      this.#listening({ host, port: bound }, 'listening')
    }
    await this.#listenInternal()
    let tlsPort: number | null = null
    if (this.#tls !== null) {
      try {
        tlsPort = await this.#tls.listen(host, listenOptions())
      } catch (e) {
        this.close()
        throw e
      }
      this.#announceTls(tlsPort)
    }
    return { port: bound, tlsPort }
  }

  /** The lines listen() logs, for ports the front-end threads bound (leavePublicPortsToThreads). */
  announce (port: number | null, tlsPort: number | null): void {
    if (port !== null) this.#listening({ host: this.#config.host, port }, 'listening')
    if (tlsPort !== null) this.#announceTls(tlsPort)
  }

  #announceTls (port: number): void {
    this.#listening({ host: this.#config.host, port, serial: this.#tls!.serial, clientCertificates: this.#config.tls?.clientCaFile !== null }, 'listening (TLS)')
  }

  /**
   * The line that says a port is open. The process says it once, when every listener is open:
   * with front-end threads the main thread's announce() does, after the last thread is bound,
   * so each thread's own line is a debug line (an operator or a script waiting for `listening`
   * sees one line per port, at the moment the whole front end answers).
   */
  #listening (fields: Record<string, unknown>, msg: string): void {
    if (isMainThread) this.#log.info(fields, msg)
    else this.#log.debug(fields, `thread ${msg}`)
  }

  async #listenInternal (): Promise<void> {
    if (this.#internal === null) return
    const app = this.#internal.app
    this.#internalSocket = await new Promise<us_listen_socket>((resolve, reject) => {
      app.listen('127.0.0.1', 0, (s) => {
        if (s === false) reject(new ThreatfeedError('TF_ERR_CONFIG', ['cannot listen on 127.0.0.1 for the front-end threads']))
        else resolve(s)
      })
    })
  }

  /** Reads the TLS files again (SIGHUP); false when there is no TLS listener or nothing changed. */
  reloadTls (reason: string): Promise<boolean> {
    return this.#tls?.reload(reason) ?? Promise.resolve(false)
  }

  stopListening (): void {
    if (this.#plainSocket !== null) uWS.us_listen_socket_close(this.#plainSocket)
    this.#plainSocket = null
    this.#tls?.stopListening()
  }

  close (): void {
    this.stopListening()
    if (this.#internalSocket !== null) uWS.us_listen_socket_close(this.#internalSocket)
    this.#internalSocket = null
    this.#internal?.app.close()
    this.#plain?.close()
    this.#tls?.close()
  }
}
