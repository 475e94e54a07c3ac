/**
 * Certificate rotation without a restart: files swapped as Kubernetes swaps a secret (a directory
 * symlink renamed over the old one) are picked up within a few seconds while pollers keep polling
 * (no failed request, connections kept), and a broken set keeps the certificate in use and says why.
 */
import t from 'tap'
import { Agent } from 'node:https'
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { makePki, startTlsServer, httpsGet, presentedSerial, type Issued } from '../helpers/tls.js'

const dir = mkdtempSync(join(tmpdir(), 'tf-tls-rotate-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const pki = makePki(dir, 'pki')
const ca = readFileSync(pki.rootFile)
const live = join(dir, 'live')
let generation = 0

/** Puts `cert` and `key` in a new directory and points `live` at it in one rename. */
function install (cert: string, key: string): void {
  const gen = join(dir, `gen-${++generation}`)
  mkdirSync(gen)
  writeFileSync(join(gen, 'tls.crt'), cert)
  writeFileSync(join(gen, 'tls.key'), key)
  symlinkSync(gen, join(dir, 'live.next'))
  renameSync(join(dir, 'live.next'), live)
}
function installIssued (leaf: Issued): void {
  install(readFileSync(leaf.certFile, 'utf8'), readFileSync(leaf.keyFile, 'utf8'))
}

async function waitForSerial (port: number, serial: string, ms: number): Promise<number> {
  const started = Date.now()
  while (Date.now() - started < ms) {
    if (await presentedSerial(port) === serial) return Date.now() - started
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return -1
}

const first = pki.issue()
installIssued(first)
const s = await startTlsServer(join(dir, 'data'), { THREATFEED_TLS_CERT: join(live, 'tls.crt'), THREATFEED_TLS_KEY: join(live, 'tls.key') })
t.teardown(() => s.server.stop())
const port = s.server.tlsPort!
const url = `${s.httpsBase}/v1/threat/feeds?format=plain`
const auth = { authorization: `Bearer ${s.key}` }

t.test('three rotations under a bounded loop of pollers: no failed request, new connections get the new serial', async (t) => {
  const leaves = [first, pki.issue({ keyType: 'rsa' }), pki.issue(), pki.issue({ keyType: 'rsa' })]
  let stop = false
  const failures: string[] = []
  const seen = new Set<string>()
  let requests = 0
  // New connection per request, as most appliances poll.
  const fresh = async (): Promise<void> => {
    while (!stop) {
      try {
        const r = await httpsGet(url, { ca, headers: auth })
        if (r.status !== 200) failures.push(`status ${r.status}`)
        seen.add(r.serial)
        requests++
      } catch (e) {
        failures.push((e as Error).message)
      }
    }
  }
  // One keep-alive connection, opened before the first rotation: it must survive all three.
  const agent = new Agent({ keepAlive: true, maxSockets: 1, ca })
  t.teardown(() => agent.destroy())
  const keptSerials: string[] = []
  const keptSockets = new Set<unknown>()
  const kept = async (): Promise<void> => {
    while (!stop) {
      try {
        const r = await httpsGet(url, { agent, headers: auth })
        if (r.status !== 200) failures.push(`keep-alive status ${r.status}`)
        keptSerials.push(r.serial)
        requests++
      } catch (e) {
        failures.push(`keep-alive: ${(e as Error).message}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
  agent.on('free', (socket) => keptSockets.add(socket))
  const loops = [fresh(), fresh(), fresh(), kept()]
  await new Promise((resolve) => setTimeout(resolve, 500))

  for (let i = 1; i < leaves.length; i++) {
    installIssued(leaves[i]!)
    const ms = await waitForSerial(port, leaves[i]!.serial, 5000)
    t.ok(ms >= 0, `rotation ${i}: new connections present serial ${leaves[i]!.serial} (after ${ms} ms)`)
    await new Promise((resolve) => setTimeout(resolve, 300))
  }
  stop = true
  await Promise.all(loops)
  t.same(failures, [], `no failed request out of ${requests}`)
  t.ok(requests > 40, `the pollers kept polling (${requests} requests)`)
  for (const leaf of leaves) t.ok(seen.has(leaf.serial), `pollers on new connections saw ${leaf.serial}`)
  t.equal(keptSockets.size, 1, 'the keep-alive connection was never dropped')
  t.same([...new Set(keptSerials)], [first.serial], 'and kept the certificate it was opened with')
  const reloads = s.logs.filter((l) => l.msg === 'TLS certificate reloaded')
  t.same(reloads.map((l) => l.serial), leaves.slice(1).map((l) => l.serial), 'one reload logged per rotation, with the serial')
  const metrics = await (await fetch(`http://127.0.0.1:${s.server.port}/metrics`)).text()
  t.match(metrics, new RegExp(`threatfeed_tls_certificate_expiry_seconds\\{role="server",subject="CN=localhost",serial="${leaves.at(-1)!.serial}"\\} \\d+`), 'the metric names the new certificate')
  t.notMatch(metrics, new RegExp(`serial="${first.serial}"`), 'and no longer the first one')
})

t.test('a rotation to broken files keeps the certificate in use and logs why', async (t) => {
  const current = await presentedSerial(port)
  const a = pki.issue()
  const b = pki.issue()
  const cases = [
    { description: 'not a certificate', cert: 'hello\n', key: readFileSync(a.keyFile, 'utf8'), message: `THREATFEED_TLS_CERT ${join(live, 'tls.crt')} holds no PEM certificate (-----BEGIN CERTIFICATE-----)` },
    { description: 'a key of another certificate', cert: readFileSync(a.certFile, 'utf8'), key: readFileSync(b.keyFile, 'utf8'), message: `THREATFEED_TLS_KEY ${join(live, 'tls.key')} does not match the certificate in ${join(live, 'tls.crt')} (subject CN=localhost)` },
    { description: 'a truncated key', cert: readFileSync(a.certFile, 'utf8'), key: readFileSync(a.keyFile, 'utf8').slice(0, 60), message: new RegExp(`^THREATFEED_TLS_KEY ${join(live, 'tls.key')} holds no PEM private key it can read`) },
  ]
  for (const c of cases) {
    const before = s.logs.length
    install(c.cert, c.key)
    await new Promise((resolve) => setTimeout(resolve, 2500))
    t.equal(await presentedSerial(port), current, `${c.description}: new connections still get serial ${current}`)
    const errors = s.logs.slice(before).filter((l) => l.level === 50)
    t.equal(errors.length, 1, `${c.description}: logged once, not on every poll`)
    const text = String(errors[0]?.msg)
    t.match(text.replace(/^invalid configuration: /, '').replace(/; keeping the TLS certificate in use.*$/, ''), c.message, c.description)
    t.match(text, `; keeping the TLS certificate in use (serial ${current})`)
    const r = await httpsGet(url, { ca, headers: auth })
    t.equal(r.status, 200, `${c.description}: still serving`)
  }
  installIssued(a)
  t.ok(await waitForSerial(port, a.serial, 5000) >= 0, 'good files again: picked up')
})
