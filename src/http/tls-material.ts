/**
 * The certificate, key and client CA files of the TLS listener, read and checked with node:crypto
 * before uWebSockets.js is handed their names: the library only says "App construction failed",
 * while an operator needs to know which file is wrong and why (as config errors name the variable).
 */
import { readFile } from 'node:fs/promises'
import { X509Certificate, createHash, createPrivateKey, type KeyObject } from 'node:crypto'
import type { TlsConfig } from '../config.js'
import { ThreatfeedError } from '../errors.js'

export type CertificateRole = 'server' | 'chain' | 'client_ca'

/** One certificate the listener presents or trusts, for the expiry metric and warnings. */
export interface CertificateInfo {
  readonly role: CertificateRole
  readonly file: string
  readonly subject: string
  /** Upper-case hex, as `openssl x509 -serial` prints it. */
  readonly serial: string
  /** Epoch ms of notAfter. */
  readonly notAfter: number
}

/** What one load of the files found; `digest` lets a caller tell whether the files changed since. */
export interface TlsMaterial {
  readonly settings: TlsConfig
  readonly certificates: readonly CertificateInfo[]
  /** The serial of the server certificate (the first in THREATFEED_TLS_CERT). */
  readonly serial: string
  readonly digest: string
}

function fail (variable: string, file: string, why: string): never {
  throw new ThreatfeedError('TF_ERR_CONFIG', [`${variable} ${file} ${why}`])
}

async function read (variable: string, file: string): Promise<Buffer> {
  try {
    return await readFile(file)
  } catch (e) {
    fail(variable, file, `cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`)
  }
}

// RFC 7468 §2: a certificate is the base64 between these two lines; text outside them is ignored.
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g

function certificates (variable: string, file: string, pem: Buffer): X509Certificate[] {
  const blocks = pem.toString('latin1').match(PEM_CERTIFICATE) ?? []
  if (blocks.length === 0) fail(variable, file, 'holds no PEM certificate (-----BEGIN CERTIFICATE-----)')
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block)
    } catch (e) {
      fail(variable, file, `certificate ${i + 1} cannot be parsed: ${(e as Error).message}`)
    }
  })
}

// PKCS #8 (RFC 5958 §3) and the traditional OpenSSL form (RFC 1421 Proc-Type) of an encrypted key.
const ENCRYPTED_PEM = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: *4, *ENCRYPTED/

function privateKey (settings: TlsConfig, pem: Buffer): KeyObject {
  const file = settings.keyFile
  if (settings.passphrase === null && ENCRYPTED_PEM.test(pem.toString('latin1'))) {
    fail('THREATFEED_TLS_KEY', file, 'is encrypted and THREATFEED_TLS_KEY_PASSPHRASE is not set')
  }
  try {
    return createPrivateKey({ key: pem, format: 'pem', passphrase: settings.passphrase ?? undefined })
  } catch (e) {
    const code = (e as { code?: string }).code
    if (settings.passphrase !== null && ENCRYPTED_PEM.test(pem.toString('latin1')) && /decrypt/i.test(`${code} ${(e as Error).message}`)) {
      fail('THREATFEED_TLS_KEY', file, 'cannot be decrypted with THREATFEED_TLS_KEY_PASSPHRASE')
    }
    fail('THREATFEED_TLS_KEY', file, `holds no PEM private key it can read: ${(e as Error).message}`)
  }
}

function info (role: CertificateRole, file: string, c: X509Certificate): CertificateInfo {
  return { role, file, subject: c.subject.replaceAll('\n', ', '), serial: c.serialNumber.toUpperCase(), notAfter: Date.parse(c.validTo) }
}

/**
 * Reads and checks the files of `settings`: a certificate chain, a private key of the same
 * public key (RSA or EC, decrypted with the passphrase when one is set), the client CA bundle.
 * Throws TF_ERR_CONFIG naming the variable and the file.
 *
 * @example
 *   const material = await loadTlsMaterial(config.tls)
 *   material.serial // '3A0F…'
 */
export async function loadTlsMaterial (settings: TlsConfig): Promise<TlsMaterial> {
  const certPem = await read('THREATFEED_TLS_CERT', settings.certFile)
  const keyPem = await read('THREATFEED_TLS_KEY', settings.keyFile)
  const caPem = settings.clientCaFile === null ? null : await read('THREATFEED_TLS_CLIENT_CA', settings.clientCaFile)
  const chain = certificates('THREATFEED_TLS_CERT', settings.certFile, certPem)
  const key = privateKey(settings, keyPem)
  const leaf = chain[0]!
  if (key.asymmetricKeyType !== 'rsa' && key.asymmetricKeyType !== 'ec') {
    fail('THREATFEED_TLS_KEY', settings.keyFile, `holds a ${key.asymmetricKeyType ?? 'unknown'} key; an RSA or EC (ECDSA) key is needed`)
  }
  if (!leaf.checkPrivateKey(key)) {
    fail('THREATFEED_TLS_KEY', settings.keyFile, `does not match the certificate in ${settings.certFile} (subject ${info('server', '', leaf).subject})`)
  }
  const found: CertificateInfo[] = chain.map((c, i) => info(i === 0 ? 'server' : 'chain', settings.certFile, c))
  if (caPem !== null) {
    for (const c of certificates('THREATFEED_TLS_CLIENT_CA', settings.clientCaFile!, caPem)) found.push(info('client_ca', settings.clientCaFile!, c))
  }
  return {
    settings,
    certificates: found,
    serial: found[0]!.serial,
    digest: digestOf(certPem, keyPem, caPem),
  }
}

function digestOf (cert: Buffer, key: Buffer, ca: Buffer | null): string {
  const h = createHash('sha256')
  for (const b of [cert, key, ca ?? Buffer.alloc(0)]) h.update(String(b.byteLength)).update(':').update(b)
  return h.digest('hex')
}

/**
 * The digest of the files' current bytes, as `TlsMaterial.digest` records it ('' when one cannot
 * be read). Content, not stat: a Kubernetes secret is swapped by renaming a directory symlink,
 * which leaves the mtime of the path read through it unchanged.
 */
export async function digestTlsFiles (settings: TlsConfig): Promise<string> {
  try {
    const [cert, key, ca] = await Promise.all([
      readFile(settings.certFile),
      readFile(settings.keyFile),
      settings.clientCaFile === null ? null : readFile(settings.clientCaFile),
    ])
    return digestOf(cert, key, ca)
  } catch {
    return ''
  }
}
