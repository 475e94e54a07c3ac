/** Recent signal batches, failures first, each failed entry's reason. */
import { useState } from 'preact/hooks'
import { get } from '../api.js'
import { Status, useLoad } from '../load.js'
import type { Batch, Page } from '../types.js'
import { formatTime } from '../variants.js'

/** A 400 refused the whole batch: none of its entries was accepted, whichever were invalid. */
export function outcome (b: Batch): string {
  const n = (k: number, one: string): string => `${k.toLocaleString('en')} ${k === 1 ? one : `${one.replace(/y$/, 'ie')}s`}`
  if (b.status === 400) return `refused whole: ${n(b.entries, 'entry')}, ${b.failed.toLocaleString('en')} invalid, none accepted`
  if (b.failed > 0) return `${b.failed.toLocaleString('en')} failed, ${b.accepted.toLocaleString('en')} of ${n(b.entries, 'entry')} accepted`
  return `all ${n(b.entries, 'entry')} accepted`
}

export function Batches ({ workspace }: { workspace: string }) {
  const [pages, setPages] = useState<Batch[][]>([])
  const [cursor, setCursor] = useState<string | null>(null)
  const loaded = useLoad(async () => {
    const first = await get<Page<Batch>>('/v1/admin/batches', { workspace, limit: 100 })
    setPages([])
    setCursor(first.next_cursor ?? null)
    return first.items
  }, [workspace])
  const more = async (): Promise<void> => {
    if (cursor === null) return
    const next = await get<Page<Batch>>('/v1/admin/batches', { workspace, limit: 100, cursor })
    setPages((p) => [...p, next.items])
    setCursor(next.next_cursor ?? null)
  }
  const all = [...(loaded.data ?? []), ...pages.flat()]
  // Failures first, each group newest first (the API answers newest first).
  const ordered = [...all.filter((b) => b.failed > 0), ...all.filter((b) => b.failed === 0)]
  return (
    <section>
      <h1>Signal batches</h1>
      <Status loaded={loaded} />
      {loaded.data !== null && ordered.length === 0 && <p class="muted">No batch in the kept window.</p>}
      <ol class="batches" data-testid="batches">
        {ordered.map((b) => (
          <li key={b.id} class={b.failed > 0 ? 'failed' : ''}>
            <p>
              <strong data-testid="batch-outcome">{outcome(b)}</strong>
              {' · '}{b.api} · HTTP {b.status} · {formatTime(b.at)}{b.key_id !== null && <> · key <code data-testid="batch-key">{b.key_id}</code></>}
            </p>
            {b.errors.length > 0 && (
              <ul class="reasons">
                {b.errors.map((e, i) => <li key={i}>{e}</li>)}
                {b.errors_truncated > 0 && <li class="muted">and {b.errors_truncated} more</li>}
              </ul>
            )}
          </li>
        ))}
      </ol>
      {cursor !== null && <button type="button" onClick={() => { void more() }}>Older batches</button>}
    </section>
  )
}
