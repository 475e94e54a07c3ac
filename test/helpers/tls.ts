/**
 * Certificates made with the openssl command for the TLS tests (a root CA, an intermediate, leaves
 * of any key type and validity), the real server (src/main.ts) with a TLS listener and a log the
 * test reads, and the clients the tests drive: curl, `openssl s_client`, node:https.
 *
 * @example
 *   const pki = makePki(dir)
 *   const leaf = pki.issue({ keyType: 'ec' })
 *   const s = await startTlsServer(dir, { THREATFEED_TLS_CERT: leaf.certFile, THREATFEED_TLS_KEY: leaf.keyFile })
 */
import { threadsFromEnv } from './feed-server.js'
import { execFile, execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { request, type RequestOptions } from 'node:https'
import type { TLSSocket } from 'node:tls'
import { PassThrough } from 'node:stream'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/log.js'
import { startServer, type RunningServer } from '../../src/main.js'
import { openStore } from '../../src/store/open.js'
import { generateApiKey, hashApiKey } from '../../src/store/api-key.js'
import { ASN_TEST_DB, COUNTRY_TEST_DB } from './server.js'

export type KeyType = 'ec' | 'rsa'

export interface Issued {
  /** The leaf, then the intermediate that signed it (the chain a server sends). */
  readonly certFile: string
  readonly keyFile: string
  /** Upper-case hex, as openssl prints it. */
  readonly serial: string
}

export interface IssueOptions {
  keyType?: KeyType
  cn?: string
  san?: string
  /** openssl `ca` dates, YYYYMMDDHHMMSSZ; default: from an hour ago, for 90 days. */
  start?: string
  end?: string
  usage?: 'server' | 'client'
  passphrase?: string
}

export interface Pki {
  readonly dir: string
  /** The root certificate clients (or the server, for client certificates) trust. */
  readonly rootFile: string
  issue (options?: IssueOptions): Issued
}

let counter = 0

function openssl (args: string[]): string {
  return execFileSync('openssl', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

export function opensslDate (ms: number): string {
  return new Date(ms).toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z'
}

function genKey (file: string, keyType: KeyType, passphrase?: string): void {
  const alg = keyType === 'ec' ? ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'] : ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048']
  const enc = passphrase === undefined ? [] : ['-aes-256-cbc', '-pass', `pass:${passphrase}`]
  openssl(['genpkey', ...alg, ...enc, '-out', file])
}

/** A root CA and an intermediate under `dir/<name>`, both of `keyType`. */
export function makePki (dir: string, name = 'pki', keyType: KeyType = 'ec'): Pki {
  const home = join(dir, name)
  mkdirSync(home, { recursive: true })
  const rootKey = join(home, 'root.key')
  const rootFile = join(home, 'root.pem')
  genKey(rootKey, keyType)
  openssl(['req', '-x509', '-new', '-key', rootKey, '-subj', `/CN=${name} root`, '-days', '3650', '-out', rootFile,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'])
  const midKey = join(home, 'intermediate.key')
  const midCsr = join(home, 'intermediate.csr')
  const midFile = join(home, 'intermediate.pem')
  genKey(midKey, keyType)
  openssl(['req', '-new', '-key', midKey, '-subj', `/CN=${name} intermediate`, '-out', midCsr])
  writeFileSync(join(home, 'ca.ext'), 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n')
  openssl(['x509', '-req', '-in', midCsr, '-CA', rootFile, '-CAkey', rootKey, '-set_serial', '0x' + (0x5000 + ++counter).toString(16), '-days', '3650', '-extfile', join(home, 'ca.ext'), '-out', midFile])
  writeFileSync(join(home, 'index.txt'), '')
  writeFileSync(join(home, 'ca.cnf'), [
    '[ ca ]', 'default_ca = tf', '[ tf ]', `database = ${join(home, 'index.txt')}`, `serial = ${join(home, 'serial')}`,
    `new_certs_dir = ${home}`, 'default_md = sha256', 'policy = any', 'unique_subject = no', '[ any ]', 'commonName = supplied', '',
  ].join('\n'))
  const intermediate = readFileSync(midFile, 'utf8')
  return {
    dir: home,
    rootFile,
    issue (o = {}) {
      const id = `leaf${++counter}`
      const keyFile = join(home, `${id}.key`)
      const csr = join(home, `${id}.csr`)
      const leaf = join(home, `${id}.leaf.pem`)
      const certFile = join(home, `${id}.pem`)
      // Random, so a test can tell any two certificates apart; a leading 1 keeps it positive and of even length.
      const serial = '1' + randomBytes(8).toString('hex').slice(1).toUpperCase()
      writeFileSync(join(home, 'serial'), serial + '\n')
      genKey(keyFile, o.keyType ?? keyType, o.passphrase)
      openssl(['req', '-new', '-key', keyFile, ...(o.passphrase === undefined ? [] : ['-passin', `pass:${o.passphrase}`]), '-subj', `/CN=${o.cn ?? 'localhost'}`, '-out', csr])
      const usage = o.usage ?? 'server'
      writeFileSync(join(home, `${id}.ext`), `[ leaf ]\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=${usage === 'server' ? 'serverAuth' : 'clientAuth'}\n` +
        (usage === 'server' ? `subjectAltName=${o.san ?? 'DNS:localhost,IP:127.0.0.1'}\n` : ''))
      const now = Date.now()
      openssl(['ca', '-batch', '-config', join(home, 'ca.cnf'), '-cert', midFile, '-keyfile', midKey, '-in', csr, '-out', leaf, '-notext',
        '-startdate', o.start ?? opensslDate(now - 3_600_000), '-enddate', o.end ?? opensslDate(now + 90 * 86_400_000),
        '-extfile', join(home, `${id}.ext`), '-extensions', 'leaf'])
      writeFileSync(certFile, readFileSync(leaf, 'utf8') + intermediate)
      return { certFile, keyFile, serial }
    },
  }
}

export interface TlsServer {
  readonly server: RunningServer
  readonly key: string
  readonly httpsBase: string
  /** Log records written so far. */
  readonly logs: Array<Record<string, unknown> & { msg: string }>
}

/** The real server with a workspace and a key of both scopes; `env` holds the TLS settings. */
export async function startTlsServer (dataDir: string, env: Record<string, string>): Promise<TlsServer> {
  const store = await openStore({ kind: 'embedded', dataDir })
  const key = generateApiKey()
  const ws = await store.workspaces.create({ name: 'main', subscription: 'active' })
  await store.keys.create({ workspaceId: ws.id, hash: hashApiKey(key), scopes: ['signals:write', 'feeds:read'] })
  await store.close()
  const config = loadConfig({
    HOST: '127.0.0.1',
    PORT: '0',
    THREATFEED_TLS_PORT: '0',
    THREATFEED_DATA_DIR: dataDir,
    THREATFEED_POLL_MS: '100',
    THREATFEED_FEED_REBUILD_MS: '0',
    THREATFEED_GEO_COUNTRY_DB: COUNTRY_TEST_DB,
    THREATFEED_GEO_ASN_DB: ASN_TEST_DB,
    THREATFEED_HTTP_THREADS: String(threadsFromEnv()),
    ...env,
  })
  const logs: TlsServer['logs'] = []
  const sink = new PassThrough()
  let pending = ''
  sink.on('data', (c: Buffer) => {
    pending += c.toString()
    let nl
    while ((nl = pending.indexOf('\n')) >= 0) {
      logs.push(JSON.parse(pending.slice(0, nl)) as TlsServer['logs'][number])
      pending = pending.slice(nl + 1)
    }
  })
  const server = await startServer(config, createLogger('info', sink))
  return { server, key, httpsBase: `https://localhost:${server.tlsPort}`, logs }
}

export interface HttpsAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Buffer
  /** The server certificate's serial, as the client saw it. */
  serial: string
  protocol: string | null
}

/** One request with node:https on a new connection unless `agent` is given. */
export function httpsGet (url: string, options: RequestOptions = {}): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, ...options }, (res) => {
      const socket = res.socket as TLSSocket
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), serial: socket.getPeerCertificate().serialNumber?.toUpperCase() ?? '', protocol: socket.getProtocol() })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

export interface ToolResult { code: number, stdout: string, stderr: string }

/** Runs curl or openssl and resolves with its exit code and output (never rejects on a non-zero exit). */
export function tool (command: 'curl' | 'openssl', args: string[], input = ''): Promise<ToolResult> {
  return new Promise((resolve) => {
    const child = execFile(command, args, { encoding: 'utf8', timeout: 20_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1
      resolve({ code, stdout, stderr })
    })
    child.stdin?.end(input)
  })
}

/** The serial `openssl s_client` sees on a new connection (upper-case hex; '' when the handshake fails). */
export async function presentedSerial (port: number, extra: string[] = []): Promise<string> {
  const r = await tool('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost', ...extra], '')
  const pem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(r.stdout)
  if (pem === null) return ''
  const out = await tool('openssl', ['x509', '-noout', '-serial'], pem[0])
  return out.stdout.trim().replace(/^serial=/, '')
}
