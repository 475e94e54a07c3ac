/**
 * Feed consumers (issue 20): `?client=NAME` through HTTP, tracking switched off, and the bad uses
 * of `threatfeed consumers ls`.
 */
import t from 'tap'
import { rmSync } from 'node:fs'
import { consumersCommand } from '../../src/cli/consumers.js'
import { runCommand } from '../helpers/cli.js'
import { consumersCli, consumersLs, makeFixture, poll, serverEnv, start, storedConsumers } from '../helpers/consumers.js'

t.test('?client= names a consumer; a bad name is a 400 with the feed error body', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  const { server } = await start(serverEnv(f.dir))
  t.teardown(() => server.stop())
  const expected = '1 to 64 letters, digits, ".", "_", "-", ":" or "@"'
  const cases = [
    { description: 'empty', query: 'client=', value: '' },
    { description: 'a space', query: 'client=fw%201', value: 'fw 1' },
    { description: 'a slash', query: 'client=a/b', value: 'a/b' },
    { description: 'non-ASCII', query: 'client=f%C3%BC', value: 'fü' },
    { description: '65 characters', query: `client=${'a'.repeat(65)}`, value: 'a'.repeat(64) + '…' },
    { description: 'malformed percent-encoding', query: 'client=%zz', value: '%zz' },
  ]
  for (const c of cases) {
    const r = await poll(server.port, { key: f.key, path: `/v1/threat/feeds?${c.query}` })
    t.equal(r.status, 400, c.description)
    t.same(JSON.parse(r.body), {
      success: false,
      error: `unsupported client: ${JSON.stringify(c.value)}`,
      details: { parameter: 'client', value: c.value, expected },
    }, c.description)
  }
  const repeated = await poll(server.port, { key: f.key, path: '/v1/threat/feeds?client=a&client=b' })
  t.same(JSON.parse(repeated.body), { success: false, error: 'unsupported repeated parameter: client', details: { parameter: 'client', expected } })
  for (const name of ['fw-1', 'a', 'x'.repeat(64), 'site_2.rack:4@dc-1']) {
    t.equal((await poll(server.port, { key: f.key, path: `/v1/threat/feeds?client=${name}` })).status, 200, name)
  }
  await storedConsumers(server, (c) => c.filter((x) => x.client !== '').length === 4 && c.some((x) => x.client === '' && x.polls === 7))
  const rows = await consumersLs(f.dir)
  t.same(rows.filter((x) => x.client !== null).map((x) => x.client).sort(), ['a', 'fw-1', 'site_2.rack:4@dc-1', 'x'.repeat(64)])
  t.same(rows.filter((x) => x.client === null).map((x) => [x.last_status, x.polls.client_errors]), [[400, 7]], 'the 400s count for the consumer without a name')
})

t.test('THREATFEED_CONSUMER_TRACKING=off counts nothing', async (t) => {
  const f = await makeFixture()
  t.teardown(() => rmSync(f.dir, { recursive: true, force: true }))
  const { server } = await start(serverEnv(f.dir, { THREATFEED_CONSUMER_TRACKING: 'off' }))
  t.equal((await poll(server.port, { key: f.key })).status, 200)
  await server.stop()
  t.same(await consumersLs(f.dir), [])
  t.equal((await consumersCli(f.dir, ['ls'])).stdout, `no feed consumers seen in the last 30 days in the store at ${f.dir}\n`)

  // Bad uses, in this process now that no server has the store open.
  const env = { THREATFEED_DATA_DIR: f.dir }
  const cases = [
    { description: '--stale without a unit', args: ['ls', '--stale', '900'], code: 2, stderr: /--stale must be a duration of at least 1s such as 90s, 15m, 12h or 7d, got "900"/ },
    { description: '--stale under a second', args: ['ls', '--stale', '500ms'], code: 2, stderr: /--stale must be a duration of at least 1s/ },
    { description: 'an unknown workspace', args: ['ls', '--workspace', '00000000-0000-4000-8000-000000000000'], code: 1, stderr: /no workspace with id 00000000-0000-4000-8000-000000000000/ },
    { description: 'an unknown verb', args: ['rm'], code: 2, stderr: /unknown consumers command "rm"; see threatfeed consumers --help/ },
    { description: 'an unknown option', args: ['ls', '--all'], code: 2, stderr: /Unknown option '--all'/ },
  ]
  for (const c of cases) {
    const r = await runCommand(consumersCommand, c.args, { env })
    t.equal(r.code, c.code, c.description)
    t.match(r.stderr, c.stderr, c.description)
  }
  const mine = await runCommand(consumersCommand, ['ls', '--workspace', f.workspaceId, '--json'], { env })
  t.same([mine.code, JSON.parse(mine.stdout)], [0, []], '--workspace of a workspace with no consumers')
})
