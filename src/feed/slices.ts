/**
 * Long loops over a workspace's rules (hundreds of thousands to millions) on the thread that
 * answers polls are written as generators that yield every few thousand rows; `runSliced` runs one
 * in slices of about SLICE_MS with the event loop in between, `runWhole` in one go (the CLI).
 */
export const SLICE_MS = 0.5

/** Rows between two yields of a sliced loop: a few hundred microseconds of work at most. */
export const ROWS_PER_YIELD = 4096

export function runWhole<T> (work: Generator<void, T>): T {
  for (;;) {
    const r = work.next()
    if (r.done === true) return r.value
  }
}

export async function runSliced<T> (work: Generator<void, T>): Promise<T> {
  let until = performance.now() + SLICE_MS
  for (;;) {
    const r = work.next()
    if (r.done === true) return r.value
    if (performance.now() >= until) {
      await new Promise<void>((resolve) => { setImmediate(resolve) })
      until = performance.now() + SLICE_MS
    }
  }
}
