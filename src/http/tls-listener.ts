/**
 * The HTTPS listener: uWebSockets.js `SSLApp`s behind one acceptor, so the certificate can change
 * without closing the listening socket or any connection.
 *
 *   acceptor (SSLApp, listens) ──pre-open: hand the fd over──▶ current generation (SSLApp, routes)
 *                                                              retired generations (keep their
 *                                                              connections; closed when empty)
 *
 * The acceptor takes each new connection before its TLS handshake and gives it to its one child
 * app (uWS `addChildAppDescriptor`, the library's own multi-thread hand-off), whose SSL context —
 * certificate, key, client CA — then runs the handshake. A rotation builds a new child from the
 * new files, adds it and removes the old one: new connections get the new certificate, open ones
 * stay on the app that accepted them. Re-opening the listening socket instead would reset the
 * connections queued on the old one (SO_REUSEPORT gives each socket its own accept queue).
 *
 * The library sets TLS 1.2 as the minimum (uSockets `SSL_CTX_set_min_proto_version`); its
 * BoringSSL fixes the TLS 1.3 suites; the TLS 1.2 list is set here. Session tickets are on by
 * default, with keys per SSL context: a rotation (a new context) makes clients do one full
 * handshake again.
 *
 * Nothing here is global: each instance owns its apps, so each front-end thread can open one.
 */
import type { AppOptions, ListenOptions, HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js'
import { isMainThread } from 'node:worker_threads'
import uWS from './uws.js'
import type { TlsConfig } from '../config.js'
import type { Logger } from '../log.js'
import { ThreatfeedError, toThreatfeedError } from '../errors.js'
import { digestTlsFiles, loadTlsMaterial, type CertificateInfo, type TlsMaterial } from './tls-material.js'
import type { Method } from './app.js'

/**
 * ECDHE with AEAD only, ECDSA and RSA certificates (Mozilla "intermediate" for TLS 1.2, without
 * DHE, which needs parameters the service would have to ship).
 */
export const TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305',
].join(':')

/** A retired app is closed once it has no connection and this long has passed (a hand-off queued before its removal may still land on it). */
const RETIRE_GRACE_MS = 2000
/** How often certificate expiry is checked for the warning. */
const EXPIRY_CHECK_MS = 3_600_000
/** Warn this long before a certificate expires (then at most once a day). */
export const EXPIRY_WARNING_MS = 14 * 86_400_000
const DAY_MS = 86_400_000

/**
 * Called on every request of a TLS app before its handler; throws to refuse. Null on plain apps.
 * `res.getX509Certificate()` is in uWebSockets.js (20.51 to 20.69) at run time, not in its typings, and must
 * not be called on a plain connection (it reads the socket as an SSL one).
 */
export type Gate = ((res: HttpResponse) => void) | null
export type RouteHandler = (res: HttpResponse, req: HttpRequest, gate: Gate) => void

/**
 * The hand-off API of uWebSockets.js (20.51 to 20.69; present at run time, not in its typings): an app's
 * descriptor is a number naming its native object; a parent app with children gives each
 * accepted socket to one of them, round robin, before the handshake.
 */
type HandOffApp = TemplatedApp & {
  getDescriptor (): number
  addChildAppDescriptor (descriptor: number): void
  removeChildAppDescriptor (descriptor: number): void
}

interface Generation {
  readonly app: HandOffApp
  readonly material: TlsMaterial
  connections: number
  retiredAt: number
}

export interface TlsListenerOptions {
  readonly log: Logger
  /** For tests of the warning; Date.now by default. */
  readonly now?: () => number
}

function appOptions (m: TlsMaterial): AppOptions {
  const s = m.settings
  return {
    cert_file_name: s.certFile,
    key_file_name: s.keyFile,
    ...(s.passphrase === null ? {} : { passphrase: s.passphrase }),
    ...(s.clientCaFile === null ? {} : { ca_file_name: s.clientCaFile }),
    ssl_ciphers: TLS12_CIPHERS,
  }
}

function buildApp (m: TlsMaterial): HandOffApp {
  try {
    return uWS.SSLApp(appOptions(m)) as HandOffApp
  } catch {
    // Our checks passed, so the library refused something else about them (or they changed since).
    throw new ThreatfeedError('TF_ERR_CONFIG', [`THREATFEED_TLS_CERT ${m.settings.certFile} and THREATFEED_TLS_KEY ${m.settings.keyFile} were refused by the TLS library`])
  }
}

const requireClientCertificate: Gate = (res) => {
  if ((res as HttpResponse & { getX509Certificate (): string }).getX509Certificate() === '') {
    throw new ThreatfeedError('TF_ERR_CLIENT_CERT_REQUIRED')
  }
}

export class TlsListener {
  readonly #settings: TlsConfig
  readonly #log: Logger
  readonly #now: () => number
  readonly #gate: Gate
  readonly #routes: Array<{ method: Method, pattern: string, handler: RouteHandler }> = []
  readonly #acceptor: HandOffApp
  #current: Generation
  #retired: Generation[] = []
  #socket: us_listen_socket | null = null
  #poller: NodeJS.Timeout | null = null
  #expiryTimer: NodeJS.Timeout | null = null
  /** Digest of files that failed to load ('' when unreadable), so they are reported once, not every poll. */
  #failedDigest: string | null = null
  #reloading: Promise<boolean> | null = null
  #closed = false
  readonly #warned = new Map<string, number>()

  private constructor (material: TlsMaterial, options: TlsListenerOptions) {
    this.#settings = material.settings
    this.#log = options.log
    this.#now = options.now ?? Date.now
    this.#gate = material.settings.clientCaFile === null ? null : requireClientCertificate
    // The acceptor never runs a handshake (each connection is handed over first), but an SSLApp
    // needs a certificate, and only an SSLApp hands connections to SSL apps.
    this.#acceptor = buildApp(material)
    this.#current = this.#generation(material)
    this.#acceptor.addChildAppDescriptor(this.#current.app.getDescriptor())
  }

  /** Reads and checks the files (TF_ERR_CONFIG naming the file), then builds the first app. */
  static async open (settings: TlsConfig, options: TlsListenerOptions): Promise<TlsListener> {
    return new TlsListener(await loadTlsMaterial(settings), options)
  }

  /** Serial of the certificate new connections get. */
  get serial (): string {
    return this.#current.material.serial
  }

  /** The certificates of the files in use (server, chain, client CAs), for the expiry metric. */
  certificates (): CertificateInfo[] {
    return this.#current.material.certificates.slice()
  }

  /** Registers a route on the current app and on every app a rotation builds. */
  route (method: Method, pattern: string, handler: RouteHandler): void {
    this.#routes.push({ method, pattern, handler })
    this.#register(this.#current.app, method, pattern, handler)
  }

  #register (app: TemplatedApp, method: Method, pattern: string, handler: RouteHandler): void {
    const gate = this.#gate
    app[method](pattern, (res: HttpResponse, req: HttpRequest) => { handler(res, req, gate) })
  }

  #generation (material: TlsMaterial): Generation {
    const app = buildApp(material)
    const g: Generation = { app, material, connections: 0, retiredAt: 0 }
    app.filter((_res, change) => { g.connections += Number(change) })
    for (const r of this.#routes) this.#register(app, r.method, r.pattern, r.handler)
    return g
  }

  /** Listens on host:port (the TLS port of the settings); resolves with the port bound. */
  async listen (host: string, options: ListenOptions): Promise<number> {
    const socket = await new Promise<us_listen_socket>((resolve, reject) => {
      this.#acceptor.listen(host, this.#settings.port, options, (s) => {
        if (s === false) reject(new ThreatfeedError('TF_ERR_CONFIG', [`THREATFEED_TLS_PORT: cannot listen on ${host}:${this.#settings.port}`]))
        else resolve(s)
      })
    })
    this.#socket = socket
    this.watch()
    return uWS.us_socket_local_port(socket)
  }

  /**
   * Checks the certificate's expiry and, with THREATFEED_TLS_RELOAD, the files, without
   * listening: what the main thread does when only front-end threads listen (app.ts).
   */
  watch (): void {
    if (this.#poller !== null) return
    this.#checkExpiry()
    // The poll also closes drained apps; with reloads on SIGHUP only, it runs for that alone.
    this.#poller = setInterval(() => { void this.#poll() }, this.#settings.reloadMs ?? RETIRE_GRACE_MS)
    this.#poller.unref()
    this.#expiryTimer = setInterval(() => { this.#checkExpiry() }, EXPIRY_CHECK_MS)
    this.#expiryTimer.unref()
  }

  async #poll (): Promise<void> {
    this.#closeDrained()
    if (this.#settings.reloadMs === null) return
    const digest = await digestTlsFiles(this.#settings)
    if (digest === this.#current.material.digest || digest === this.#failedDigest) return
    await this.reload('files changed')
  }

  /**
   * Loads the files again and, when they are good and differ from the ones in use, moves new
   * connections to them. A broken set keeps the current certificate and logs why. Resolves true
   * when the certificate changed.
   */
  reload (reason: string): Promise<boolean> {
    this.#reloading ??= this.#reload(reason).finally(() => { this.#reloading = null })
    return this.#reloading
  }

  async #reload (reason: string): Promise<boolean> {
    let material: TlsMaterial
    let next: Generation
    try {
      material = await loadTlsMaterial(this.#settings)
      if (material.digest === this.#current.material.digest) {
        this.#note('info', { reason, serial: this.serial }, 'TLS files unchanged')
        return false
      }
      next = this.#generation(material)
      // The library reads the files by name: if they changed since they were checked, the app
      // may hold other bytes than those checked; drop it and let the next poll see the change.
      if (await digestTlsFiles(this.#settings) !== material.digest) {
        next.app.close()
        return false
      }
    } catch (e) {
      const err = toThreatfeedError(e)
      this.#failedDigest = await digestTlsFiles(this.#settings)
      this.#note('error', { err, code: err.code, reason }, `${err.message}; keeping the TLS certificate in use (serial ${this.serial})`)
      return false
    }
    if (this.#closed) {
      next.app.close()
      return false
    }
    const old = this.#current
    this.#acceptor.addChildAppDescriptor(next.app.getDescriptor())
    this.#acceptor.removeChildAppDescriptor(old.app.getDescriptor())
    this.#current = next
    old.retiredAt = this.#now()
    this.#retired.push(old)
    this.#failedDigest = null
    this.#note('info', { reason, serial: material.serial, previous: old.material.serial, notAfter: new Date(material.certificates[0]!.notAfter).toISOString() }, 'TLS certificate reloaded')
    this.#checkExpiry()
    return true
  }

  /**
   * A line about the certificate. Every front-end thread holds a listener of its own and reloads
   * with the main thread, which says it for the process; a thread's own line is a debug line
   * (the reload was logged once per thread before).
   */
  #note (level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string): void {
    if (isMainThread) this.#log[level](fields, msg)
    else this.#log.debug(fields, `thread: ${msg}`)
  }

  /** Closes the apps of earlier certificates once their last connection has gone. */
  #closeDrained (): void {
    const now = this.#now()
    this.#retired = this.#retired.filter((g) => {
      if (g.connections > 0 || now - g.retiredAt < RETIRE_GRACE_MS) return true
      g.app.close()
      return false
    })
  }

  #checkExpiry (): void {
    const now = this.#now()
    for (const c of this.#current.material.certificates) {
      const left = c.notAfter - now
      if (left > EXPIRY_WARNING_MS) continue
      const id = `${c.file}|${c.serial}`
      const last = this.#warned.get(id)
      if (last !== undefined && now - last < DAY_MS) continue
      this.#warned.set(id, now)
      const fields = { file: c.file, role: c.role, subject: c.subject, serial: c.serial, notAfter: new Date(c.notAfter).toISOString() }
      if (left <= 0) this.#note('error', fields, `TLS certificate ${c.subject} in ${c.file} has expired`)
      else this.#note('warn', { ...fields, daysLeft: Math.floor(left / DAY_MS) }, `TLS certificate ${c.subject} in ${c.file} expires in ${Math.ceil(left / DAY_MS)} days`)
    }
  }

  /** Stops accepting connections and watching the files; open connections stay. */
  stopListening (): void {
    if (this.#poller !== null) clearInterval(this.#poller)
    if (this.#expiryTimer !== null) clearInterval(this.#expiryTimer)
    this.#poller = this.#expiryTimer = null
    if (this.#socket !== null) uWS.us_listen_socket_close(this.#socket)
    this.#socket = null
  }

  /** Closes every connection and app. */
  close (): void {
    this.#closed = true
    this.stopListening()
    for (const g of [this.#current, ...this.#retired]) g.app.close()
    this.#retired = []
    this.#acceptor.close()
  }
}
