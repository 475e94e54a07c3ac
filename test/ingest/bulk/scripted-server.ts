/** A node:http server that answers each POST from a script, records bodies and concurrency. */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface ScriptedAnswer {
  status: number
  body?: unknown
  headers?: Record<string, string>
  /** Answer after this many ms. */
  delayMs?: number
  /** Drop the connection instead of answering. */
  destroy?: boolean
}

export interface ScriptedServer {
  url: string
  bodies: string[]
  authorizations: string[]
  maxInFlight: number
  close (): Promise<void>
}

/** `answer(n, body)` decides the answer to the n-th request (0-based). */
export async function startScriptedServer (answer: (n: number, body: string) => ScriptedAnswer): Promise<ScriptedServer> {
  let n = 0
  let inFlight = 0
  const state = { bodies: [] as string[], authorizations: [] as string[], maxInFlight: 0 }
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    inFlight++
    state.maxInFlight = Math.max(state.maxInFlight, inFlight)
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString()
      state.bodies.push(body)
      state.authorizations.push(req.headers.authorization ?? '')
      const a = answer(n++, body)
      setTimeout(() => {
        inFlight--
        if (a.destroy === true) { req.socket.destroy(); return }
        res.writeHead(a.status, { 'Content-Type': 'application/json', ...a.headers })
        res.end(a.body === undefined ? '' : JSON.stringify(a.body))
      }, a.delayMs ?? 0)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/v1/signal`,
    get bodies () { return state.bodies },
    get authorizations () { return state.authorizations },
    get maxInFlight () { return state.maxInFlight },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }),
  }
}
