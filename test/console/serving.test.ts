/**
 * /console from the uWebSockets.js front end: index.html revalidated on every load, hashed assets
 * cached for a year, gzip when asked, ETag/304, the security headers on every console answer
 * (found or not), no inline script, no address of another origin, and the size budget
 * (at most 150 KB gzipped, issue #22).
 */
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { request } from 'node:http'
import { startTestServer } from '../helpers/server.js'
import { ensureConsoleBuilt, ROOT } from './built.js'

const dir = ensureConsoleBuilt()
const srv = await startTestServer()
t.teardown(() => srv.close())

const SECURITY: Record<string, string> = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
}

/** A raw answer (node:http, so Content-Encoding is not undone as fetch would). */
function get (path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number, headers: Record<string, string | string[] | undefined>, body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(`${srv.url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }) })
    })
    req.on('error', reject)
    req.end()
  })
}

const index = await get('/console')
const html = index.body.toString('utf8')
const referenced = [...html.matchAll(/(?:src|href)="\/console\/assets\/([^"]+)"/g)].map((m) => m[1]!)

t.test('index.html: no-cache, HTML, the security headers, and it names one hashed script and one stylesheet', async (t) => {
  t.equal(index.status, 200)
  t.equal(index.headers['content-type'], 'text/html; charset=utf-8')
  t.equal(index.headers['cache-control'], 'no-cache')
  for (const [k, v] of Object.entries(SECURITY)) t.equal(index.headers[k], v, k)
  t.same(referenced.map((n) => n.replace(/-[A-Z0-9]{8}\./, '-HASH.')).sort(), ['app-HASH.css', 'app-HASH.js'])
  t.equal((await get('/console/')).body.toString('utf8'), html, '/console/ is the same page')
})

t.test('no inline script or style anywhere the CSP would have to allow it', async (t) => {
  t.same([...html.matchAll(/<script\b[^>]*>/g)].map((m) => /\bsrc="/.test(m[0])), [true], 'every script has a src')
  t.notMatch(html, /<style\b|\sstyle="|\son[a-z]+=/i, 'no <style>, style= or on…= attribute')
  // Preact itself supports dangerouslySetInnerHTML; the console's own sources never use it.
  const sources = join(ROOT, 'console', 'src')
  for (const name of readdirSync(sources, { recursive: true, encoding: 'utf8' }).filter((n) => /\.tsx?$/.test(n))) {
    const text = readFileSync(join(sources, name), 'utf8')
    t.notOk(/dangerouslySetInnerHTML|innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(|\bstyle=\{/.test(text), `${name} writes no HTML strings, evaluates no code, sets no inline style`)
  }
})

t.test('nothing is fetched from another origin: the only absolute addresses are XML namespaces', async (t) => {
  for (const name of readdirSync(join(dir, 'assets'))) {
    const text = readFileSync(join(dir, 'assets', name), 'utf8')
    const urls = [...text.matchAll(/(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}[^\s"'`)]*/gi)].map((m) => m[0])
    t.same(urls.filter((u) => !/^http:\/\/www\.w3\.org\//.test(u)), [], name)
  }
  t.notMatch(html, /https?:\/\//)
})

t.test('hashed assets: a year, immutable, the right type, gzip when accepted, 304 on the ETag', async (t) => {
  for (const name of referenced) {
    const file = readFileSync(join(dir, 'assets', name))
    const plain = await get(`/console/assets/${name}`)
    t.equal(plain.status, 200, name)
    t.equal(plain.headers['cache-control'], 'public, max-age=31536000, immutable')
    t.equal(plain.headers['content-type'], name.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8')
    t.equal(plain.headers['vary'], 'Accept-Encoding')
    t.equal(plain.headers['content-encoding'], undefined)
    t.ok(plain.body.equals(file), 'identity: the built file')
    for (const [k, v] of Object.entries(SECURITY)) t.equal(plain.headers[k], v, k)
    const gz = await get(`/console/assets/${name}`, { 'accept-encoding': 'gzip, br' })
    t.equal(gz.headers['content-encoding'], 'gzip')
    t.ok(gz.body.byteLength < file.byteLength, 'gzip is smaller')
    const again = await get(`/console/assets/${name}`, { 'if-none-match': String(plain.headers['etag']) })
    t.equal(again.status, 304)
    t.equal(again.body.byteLength, 0)
  }
  const revalidated = await get('/console', { 'if-none-match': String(index.headers['etag']) })
  t.equal(revalidated.status, 304, 'index.html revalidates to 304')
})

t.test('what the console does not serve: a table of requests', async (t) => {
  const cases = [
    { description: 'an unknown asset', path: '/console/assets/app-00000000.js', method: 'GET', status: 404, allow: undefined, ours: true },
    { description: 'a path outside assets/', path: '/console/assets/../../package.json', method: 'GET', status: 404, allow: undefined, ours: false },
    { description: 'an encoded traversal', path: '/console/assets/..%2F..%2Fpackage.json', method: 'GET', status: 404, allow: undefined, ours: true },
    { description: 'index.html under assets/', path: '/console/assets/index.html', method: 'GET', status: 404, allow: undefined, ours: true },
    { description: 'POST to the page', path: '/console', method: 'POST', status: 405, allow: 'GET, HEAD', ours: true },
    { description: 'DELETE an asset', path: `/console/assets/${referenced[0]!}`, method: 'DELETE', status: 405, allow: 'GET, HEAD', ours: false },
  ]
  for (const c of cases) {
    const r = await get(c.path, {}, c.method)
    t.equal(r.status, c.status, c.description)
    t.equal(r.headers['allow'], c.allow, `${c.description}: Allow`)
    t.equal(r.headers['content-type'], 'application/json', `${c.description}: an error body`)
    if (c.status === 404) {
      t.same(JSON.parse(r.body.toString('utf8')), { error: 'NotFoundError', message: 'not found', code: 404 }, c.description)
    }
    // A path the console routes never match gets the server's own 404, without the console's headers.
    if (c.ours && c.status === 404) t.equal(r.headers['content-security-policy'], SECURITY['content-security-policy'], `${c.description}: CSP`)
  }
  const head = await get('/console', {}, 'HEAD')
  t.equal(head.status, 200)
  t.equal(head.headers['content-length'], String(index.body.byteLength), 'HEAD: the length of GET')
  t.equal(head.body.byteLength, 0)
})

t.test('console assets add at most 150 KB gzipped (issue #22)', async (t) => {
  const files = [join(dir, 'index.html'), ...readdirSync(join(dir, 'assets')).map((n) => join(dir, 'assets', n))]
  const gzipped = files.reduce((sum, f) => sum + gzipSync(readFileSync(f), { level: 9 }).byteLength, 0)
  t.comment(`console assets: ${files.length} files, ${gzipped} bytes gzipped`)
  t.ok(gzipped <= 150 * 1024, `${gzipped} bytes gzipped <= 153600`)
})

t.test('loading the build: a missing directory gives no page (the routes then answer 404); gzip kept only when smaller', async (t) => {
  const { loadConsoleAssets } = await import('../../src/http/console-assets.js')
  const { mkdtempSync, mkdirSync, writeFileSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const none = loadConsoleAssets(join(tmpdir(), 'tf-console-absent-dir'))
  t.equal(none.index, null)
  t.equal(none.assets.size, 0)
  const small = mkdtempSync(join(tmpdir(), 'tf-console-'))
  mkdirSync(join(small, 'assets'))
  writeFileSync(join(small, 'index.html'), '<!doctype html>')
  writeFileSync(join(small, 'assets', 'a-00000000.js'), 'x')
  const loaded = loadConsoleAssets(small)
  t.equal(loaded.index?.gzip, null, 'a body gzip would not shrink goes out as is')
  t.equal(loaded.assets.get('a-00000000.js')?.contentType, 'text/javascript; charset=utf-8')
})
