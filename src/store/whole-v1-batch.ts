/**
 * Whole v1 batches on the stream (types.ts WholeV1Batch): told apart from record lists, and
 * split into their records when read back.
 */
import { splitJsonArray } from '../json/array-splitter.js'
import type { StreamAppend, StreamRecordInput, WholeV1Batch } from './types.js'

export function isWholeV1Batch (input: StreamAppend): input is WholeV1Batch {
  return !Array.isArray(input)
}

/** How many records an append holds. */
export function appendCount (input: StreamAppend): number {
  return isWholeV1Batch(input) ? input.count : input.length
}

/**
 * The texts of the elements of a whole batch's body, `count` of them; a RangeError when the body
 * holds another number of elements or is not a JSON array (a damaged value: the ingest path only
 * appends bodies it parsed).
 *
 * @example
 *   wholeBatchTexts(Buffer.from('[{"ip":"192.0.2.1"}, {"ip":"192.0.2.2"}]'), 2) // ['{"ip":"192.0.2.1"}', '{"ip":"192.0.2.2"}']
 */
export function wholeBatchTexts (body: Buffer, count: number): string[] {
  let texts: string[]
  try {
    texts = splitJsonArray(body.toString('utf8'))
  } catch (e) {
    throw new RangeError('a whole v1 batch that is not a JSON array', { cause: e })
  }
  if (texts.length !== count) throw new RangeError(`a whole v1 batch of ${texts.length} elements, recorded as ${count}`)
  return texts
}

/** The records of an append, a whole batch split into its elements. */
export function appendRecords (input: StreamAppend): StreamRecordInput[] {
  if (!isWholeV1Batch(input)) return input
  const { workspaceId, acceptedAt } = input
  return wholeBatchTexts(input.body, input.count).map((payload) => ({ workspaceId, payload, acceptedAt }))
}
