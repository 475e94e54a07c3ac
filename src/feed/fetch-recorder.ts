/**
 * When each feed was last served, written to its feed-version records (FeedVersionStore#recordFetches)
 * so a restart builds the feeds served in the hour before it ahead of reporting ready.
 */
import type { Logger } from '../log.js'
import type { FeedFetch, FeedVersionStore } from '../store/types.js'

/** Least time between two recorded fetch times of one feed: a store write per poll would be one per request. */
export const RECORD_MS = 5 * 60_000
/** After a failed write of fetch times, the next attempt waits this long. */
const RECORD_RETRY_MS = 10_000

export class FetchRecorder {
  readonly #feedVersions: Pick<FeedVersionStore, 'recordFetches'>
  readonly #log: Pick<Logger, 'debug'>
  #recording = false
  #recordAfter = 0

  constructor (feedVersions: Pick<FeedVersionStore, 'recordFetches'>, log: Pick<Logger, 'debug'>) {
    this.#feedVersions = feedVersions
    this.#log = log
  }

  /** Writes fetch times (one call for every feed due); a failure is retried after RECORD_RETRY_MS. */
  async record (due: FeedFetch[], now: number, recorded: (fetch: FeedFetch) => void): Promise<void> {
    if (this.#recording || now < this.#recordAfter) return
    this.#recording = true
    try {
      await this.#feedVersions.recordFetches(due)
      for (const d of due) recorded(d)
    } catch (e) {
      this.#recordAfter = Date.now() + RECORD_RETRY_MS
      this.#log.debug({ err: e }, 'feed service: fetch times not recorded; retrying later')
    } finally {
      this.#recording = false
    }
  }
}
