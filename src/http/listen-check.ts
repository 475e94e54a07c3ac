/**
 * Checks, before uWebSockets.js listens, that HOST is an address of this machine and that no other
 * process holds PORT or THREATFEED_TLS_PORT.
 *
 * uSockets listens with SO_REUSEPORT (front-threads.ts: our own threads share the ports that way),
 * so a second server on a port held by another SO_REUSEPORT socket — another threatfeed, say —
 * would start and split the connections with it. A plain bind (node:net sets no SO_REUSEPORT)
 * fails with EADDRINUSE on any port a socket listens on, whatever its options: that is the probe.
 * It also resolves HOST, which uSockets does synchronously with no bound on the time, and reports
 * why an address cannot be bound, which uSockets does not.
 *
 * The probe closes before uWebSockets.js listens. With one front end the main thread then listens
 * with LIBUS_LISTEN_EXCLUSIVE_PORT (tls-listeners.ts), which leaves no window; with front-end
 * threads, a server started in the moment between the probe and the threads' listen is not
 * seen — but it is refused in turn, since its own probe finds our threads' sockets.
 */
import { createServer } from 'node:net'
import type { Config } from '../config.js'
import { ThreatfeedError } from '../errors.js'

/** How long HOST may take to resolve and bind: a resolver that does not answer must not hang the start. */
export const LISTEN_CHECK_MS = 10_000

/** The listeners of `config` by the variable that sets each port. */
function listenersOf (config: Config): Array<{ variable: string, port: number }> {
  const out: Array<{ variable: string, port: number }> = []
  if (config.port !== null) out.push({ variable: 'PORT', port: config.port })
  if (config.tls !== null) out.push({ variable: 'THREATFEED_TLS_PORT', port: config.tls.port })
  return out
}

/** Why `host` and `port` cannot be listened on, in the operator's terms, or null: they can. */
function probe (host: string, variable: string, port: number, timeoutMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    const server = createServer()
    const timer = setTimeout(() => {
      server.close()
      resolve(`HOST ${host} did not resolve or bind within ${timeoutMs} ms`)
    }, timeoutMs)
    server.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      server.close()
      resolve(reasonOf(e, host, variable, port))
    })
    server.listen({ host, port, exclusive: true }, () => {
      clearTimeout(timer)
      server.close(() => { resolve(null) })
    })
  })
}

function reasonOf (e: NodeJS.ErrnoException, host: string, variable: string, port: number): string {
  switch (e.code) {
    case 'EADDRINUSE': return `${variable} ${port} is in use (by another process on ${host})`
    case 'EADDRNOTAVAIL': return `HOST ${host} is not an address of this machine (EADDRNOTAVAIL)`
    case 'ENOTFOUND':
    case 'EAI_NONAME':
    case 'EAI_AGAIN':
    case 'EAI_FAIL':
      return `HOST ${host} does not resolve (${e.code})`
    case 'EACCES': return `${variable} ${port}: permission denied on ${host} (a port below 1024 needs privileges)`
    default: return `cannot listen on ${host}:${port} (${variable}): ${e.code ?? e.message}`
  }
}

/**
 * Throws TF_ERR_CONFIG naming the variable at fault when a listener of `config` cannot be opened
 * by this process alone. A port of 0 is probed too: that checks HOST.
 */
export async function checkListenAddresses (config: Config, timeoutMs = LISTEN_CHECK_MS): Promise<void> {
  for (const { variable, port } of listenersOf(config)) {
    const reason = await probe(config.host, variable, port, timeoutMs)
    if (reason !== null) throw new ThreatfeedError('TF_ERR_CONFIG', [reason])
  }
}
