/**
 * The listeners of one front end: the plain HTTP app (unless `PORT=off`) and the HTTPS listener
 * (when a certificate is configured), with every route registered on both. app.ts registers
 * through `route` and never creates an App itself; one instance per front-end thread.
 */
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js'
import uWS from './uws.js'
import type { Config } from '../config.js'
import type { Logger } from '../log.js'
import { ThreatfeedError } from '../errors.js'
import { TlsListener, type RouteHandler } from './tls-listener.js'
import type { Method } from './app.js'
import { registerCertificateMetrics, type Metrics } from './metrics.js'

export class Listeners {
  readonly #config: Config
  readonly #log: Logger
  readonly #plain: TemplatedApp | null
  readonly #tls: TlsListener | null
  #plainSocket: us_listen_socket | null = null

  private constructor (config: Config, log: Logger, tls: TlsListener | null) {
    this.#config = config
    this.#log = log
    this.#plain = config.port === null ? null : uWS.App()
    this.#tls = tls
  }

  /** Opens the TLS listener's files first: a bad certificate or key stops the start here. */
  static async open (config: Config, log: Logger, metrics: Metrics): Promise<Listeners> {
    const tls = config.tls === null ? null : await TlsListener.open(config.tls, { log })
    if (tls !== null) registerCertificateMetrics(metrics, () => tls.certificates())
    return new Listeners(config, log, tls)
  }

  route (method: Method, pattern: string, handler: RouteHandler): void {
    this.#plain?.[method](pattern, (res: HttpResponse, req: HttpRequest) => { handler(res, req, null) })
    this.#tls?.route(method, pattern, handler)
  }

  /** Binds every listener; the ports bound (null for a listener that is off). */
  async listen (): Promise<{ port: number | null, tlsPort: number | null }> {
    const { host, port } = this.#config
    let bound: number | null = null
    if (this.#plain !== null && port !== null) {
      const plain = this.#plain
      this.#plainSocket = await new Promise<us_listen_socket>((resolve, reject) => {
        plain.listen(host, port, (s) => {
          if (s === false) reject(new ThreatfeedError('TF_ERR_CONFIG', [`cannot listen on ${host}:${port}`]))
          else resolve(s)
        })
      })
      bound = uWS.us_socket_local_port(this.#plainSocket)
      this.#log.info({ host, port: bound }, 'listening')
    }
    let tlsPort: number | null = null
    if (this.#tls !== null) {
      try {
        tlsPort = await this.#tls.listen(host)
      } catch (e) {
        this.close()
        throw e
      }
      this.#log.info({ host, port: tlsPort, serial: this.#tls.serial, clientCertificates: this.#config.tls?.clientCaFile !== null }, 'listening (TLS)')
    }
    return { port: bound, tlsPort }
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
    this.#plain?.close()
    this.#tls?.close()
  }
}
