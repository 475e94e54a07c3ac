/**
 * The crash run of issue 35, short (bench/crash/run.ts has the long one): v1 ingest at 4 in
 * flight, the server SIGKILLed (double kills included) while CLI commands run on the same data
 * directory; after each restart every acknowledged batch is found at the positions its receipt
 * named, with its id; at the end no batch answered 500 is in the stream, and none is there twice.
 */
import t from 'tap'
import { runCrash } from '../../bench/crash/run.js'

t.test('no acknowledged batch is lost, none answered 500 is applied, none is applied twice', async (t) => {
  const report = await runCrash({ minutes: 0.8, trials: 2, windowMs: [3000, 6000] })
  t.comment(JSON.stringify(report))
  t.same(report.problems, [], 'nothing wrong')
  t.ok(report.trials >= 2 && report.kills >= 2, 'the server was killed at least twice')
  t.ok(report.batchesAcknowledged > 0, 'batches were acknowledged (and checked by receipt)')
  t.equal(report.missing, 0, 'no acknowledged batch missing')
  t.equal(report.duplicated, 0, 'no batch applied twice')
  t.equal(report.applied500, 0, 'no batch answered 500 applied')
  t.ok(report.streamRecords >= report.entriesAcknowledged, 'the stream holds at least every acknowledged entry')
})
