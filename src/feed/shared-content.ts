/**
 * Bytes that several snapshots hold alike, held once per process: a stream's text (the same for
 * every feed that selects the same networks), compressed chunks (the same wherever the same lines
 * occur: in overlapping lists, and from one build of a feed to the next) and assembled bodies.
 *
 *   FeedSnapshot A ─┐ strong                       ┌─────────────────────────────────┐
 *   FeedSnapshot B ─┼──────► Uint8Array ◄── weak ──┤ SharedContent  key → WeakRef    │
 *   (next build) ───┘                              └─────────────────────────────────┘
 *
 * Snapshots hold what they use; this table only finds it again. An entry goes when no snapshot
 * holds its bytes any more (a FinalizationRegistry drops the key), so it never keeps memory alive
 * on its own and needs no eviction. Keys are content keys (src/feed/render/content-key.ts), with
 * a prefix per kind so that kinds never meet: `t:` text, `z:` compressed chunk, `i:`/`g…:` body.
 *
 * Measured (bench/snapshot.ts, ten lists selecting the workspace's 131,072 networks, plus the
 * workspace feed): ~11 MB of text and compressed chunks per feed, held eleven times, was 120 MB
 * of the process's memory; held once, 11 MB.
 */
export class SharedContent {
  readonly #entries = new Map<string, WeakRef<Uint8Array>>()
  readonly #finalizer = new FinalizationRegistry<string>((key) => {
    // The key may have been taken since by a newer Uint8Array: drop it only if it is dead.
    const ref = this.#entries.get(key)
    if (ref !== undefined && ref.deref() === undefined) this.#entries.delete(key)
  })

  /** The live bytes under `key`, if any snapshot still holds them. */
  get (key: string): Uint8Array | undefined {
    return this.#entries.get(key)?.deref()
  }

  /**
   * The bytes under `key`: those already held when there are, else `bytes()` (called only then),
   * which are registered. The caller must keep the returned object (not a view of it) for as long
   * as it uses the bytes: the entry lives as long as that object does.
   *
   * @example
   *   const text = shared.intern(`t:${r.textKey}`, () => new Uint8Array(r.text))
   */
  intern (key: string, bytes: () => Uint8Array): Uint8Array {
    const held = this.get(key)
    if (held !== undefined) return held
    const fresh = bytes()
    this.#entries.set(key, new WeakRef(fresh))
    this.#finalizer.register(fresh, key)
    return fresh
  }

  /** Keys currently registered (some may be dead and not yet finalised); for tests and metrics. */
  get size (): number {
    return this.#entries.size
  }
}

/** The process's table: feeds of every workspace share through it (equal keys are equal bytes). */
export const sharedContent = new SharedContent()
