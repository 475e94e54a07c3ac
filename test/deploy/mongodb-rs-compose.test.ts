/**
 * deploy/mongodb-rs.compose.yml, checked statically (no Docker engine runs here): three members
 * each on its own published port, one set initiated with all three, three nodes on the set.
 */
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'

const root = new URL('../../', import.meta.url).pathname
const file = join(root, 'deploy/mongodb-rs.compose.yml')
const text = readFileSync(file, 'utf8')

t.test('three members, one replica set of all three, three nodes on it', async (t) => {
  const cases = [
    ...[['mongo1', 27017], ['mongo2', 27018], ['mongo3', 27019]].map(([name, port]) => ({
      description: `${name} listens on ${port} and publishes it`,
      pattern: new RegExp(`${name}:\\n[^]*?"--port", "${port}"[^]*?ports: \\["${port}:${port}"\\]`),
    })),
    { description: 'the set is initiated with the three members by name and port', pattern: /rs\.initiate\(\{ _id: 'rs0', members: \[\s*\{ _id: 0, host: 'mongo1:27017'[^]*host: 'mongo2:27018'[^]*host: 'mongo3:27019'/ },
    { description: 'healthy once a primary is elected', pattern: /quit\(db\.hello\(\)\.primary \? 0 : 1\)/ },
    { description: 'nodes use the whole set', pattern: /THREATFEED_MONGODB_URI: mongodb:\/\/mongo1:27017,mongo2:27018,mongo3:27019\/\?replicaSet=rs0/ },
    ...['tf1', 'tf2', 'tf3'].map((n, i) => ({ description: `node ${n} published on ${8081 + i}`, pattern: new RegExp(`${n}:[^]*?ports: \\["${8081 + i}:8080"\\]`) })),
    { description: 'nodes wait for a primary', pattern: /mongo1: \{ condition: service_healthy \}/ },
  ]
  for (const c of cases) t.match(text, c.pattern, c.description)
})

t.test('docker compose config accepts the file', { skip: spawnSync('docker', ['compose', 'version']).status === 0 ? false : 'the docker compose plugin is not installed' }, async (t) => {
  const r = spawnSync('docker', ['compose', '-f', file, 'config', '--quiet'], { encoding: 'utf8' })
  t.equal(r.status, 0, r.stderr)
})
