/**
 * docker-compose.yml and its proxy, checked statically (no Docker engine runs here): the proxy's
 * configuration with `nginx -t`, the compose file with `docker compose config` where the plugin is
 * installed, and what the several-node set-up needs of each service.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'

const root = new URL('../../', import.meta.url).pathname
const compose = readFileSync(join(root, 'docker-compose.yml'), 'utf8')
const proxyConf = readFileSync(join(root, 'deploy/nginx-lb.conf'), 'utf8')
const nodesPage = readFileSync(join(root, 'docs', 'nodes.md'), 'utf8')

function has (tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0
}

/** The text of one top-level service of the compose file (up to the next service or section). */
function service (name: string): string {
  const start = compose.indexOf(`\n  ${name}:`)
  if (start < 0) return ''
  const rest = compose.slice(start + 1)
  const end = rest.slice(1).search(/\n {2}[a-z][\w-]*:|\n[a-z]/)
  return end < 0 ? rest : rest.slice(0, end + 1)
}

t.test('the proxy configuration passes nginx -t', { skip: has('nginx') ? false : 'nginx is not installed (apt-get install nginx)' }, async (t) => {
  const prefix = mkdtempSync(join(tmpdir(), 'tf-lb-'))
  t.teardown(() => rmSync(prefix, { recursive: true, force: true }))
  mkdirSync(join(prefix, 'logs'))
  // The node names resolve inside the compose network only; here they stand for this host.
  const conf = proxyConf.replaceAll('threatfeed-a:', '127.0.0.1:').replaceAll('threatfeed-b:', '127.0.0.2:')
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((d) => `${d}_temp_path ${join(prefix, d)};`).join('\n  ')
  writeFileSync(join(prefix, 'nginx.conf'), `pid ${join(prefix, 'nginx.pid')};\nerror_log ${join(prefix, 'logs', 'error.log')};\nevents {}\nhttp {\n  access_log off;\n  ${temp}\n${conf}}\n`)
  const check = spawnSync('nginx', ['-t', '-p', prefix, '-c', join(prefix, 'nginx.conf')], { encoding: 'utf8' })
  t.equal(check.status, 0, check.stderr)
  t.match(proxyConf, /upstream threatfeed_nodes \{[^}]*server threatfeed-a:8080[^}]*server threatfeed-b:8080/, 'both nodes, round robin (nginx\'s default)')
  t.match(proxyConf, /proxy_http_version 1\.1;/, 'HTTP/1.1 to threatfeed (1.0 gets 505)')
})

t.test('docker compose config accepts the file', { skip: spawnSync('docker', ['compose', 'version']).status === 0 ? false : 'the docker compose plugin is not installed' }, async (t) => {
  const r = spawnSync('docker', ['compose', '-f', join(root, 'docker-compose.yml'), 'config', '--quiet'], { encoding: 'utf8' })
  t.equal(r.status, 0, r.stderr)
})

t.test('the compose file: a writable primary before the nodes start, restarts, the port published, two nodes behind the proxy', async (t) => {
  const mongo = service('mongo')
  const cases = [
    { description: 'the health check exits non-zero until the member is a writable primary', text: mongo, pattern: /quit\(db\.hello\(\)\.isWritablePrimary \? 0 : 1\)/ },
    { description: 'the replica set is initiated on first start', text: mongo, pattern: /rs\.initiate\(/ },
    { description: 'MongoDB is published on the host', text: mongo, pattern: /ports:\s*\n\s*- "27017:27017"/ },
    { description: 'MongoDB restarts', text: mongo, pattern: /restart: unless-stopped/ },
    { description: 'node a restarts', text: service('threatfeed-a'), pattern: /restart: unless-stopped/ },
    { description: 'node a waits for a healthy MongoDB', text: service('threatfeed-a'), pattern: /condition: service_healthy/ },
    { description: 'node a uses MongoDB', text: service('threatfeed-a'), pattern: /THREATFEED_STORE: mongodb/ },
    { description: 'node b is node a (same settings)', text: service('threatfeed-b'), pattern: /<<: \*node/ },
    { description: 'the proxy publishes the service port', text: service('proxy'), pattern: /ports:\s*\n\s*- "8080:8080"/ },
    { description: 'the proxy mounts its configuration', text: service('proxy'), pattern: /\.\/deploy\/nginx-lb\.conf:\/etc\/nginx\/conf\.d\/default\.conf/ },
    { description: 'the nodes trust the proxy\'s fixed address', text: compose, pattern: /THREATFEED_TRUSTED_PROXIES: 172\.28\.0\.10[\s\S]*ipv4_address: 172\.28\.0\.10/ },
  ]
  for (const c of cases) t.match(c.text, c.pattern, c.description)
  t.notMatch(service('threatfeed-a'), /ports:/, 'nodes are reached through the proxy only')
})

t.test('docs/nodes.md gives the host URI of the compose MongoDB', async (t) => {
  t.match(nodesPage, /mongodb:\/\/localhost:27017\/\?directConnection=true/)
  t.match(compose, /mongodb:\/\/localhost:27017\/\?directConnection=true/)
})
