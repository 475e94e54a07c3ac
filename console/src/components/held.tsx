/** What accepting a held build changes: the API's diff per action (counts and a sample of networks). */
import type { Held } from '../types.js'
import { describeHeldGuards, formatTime } from '../variants.js'

export function HeldBuild ({ held }: { held: Held }) {
  const actions = Object.entries(held.diff ?? {}).filter(([, d]) => d.added > 0 || d.removed > 0 || d.published !== d.held)
  return (
    <div data-testid="held-diff">
      <p>Held since {formatTime(held.since)} by {describeHeldGuards(held.guards)}; the feed serves its last published build. Accepting publishes build <code>{held.digest}</code>, which changes:</p>
      {actions.length === 0
        ? <p class="muted">No difference in networks is recorded for this build.</p>
        : (
          <ul class="diff">
            {actions.map(([action, d]) => (
              <li key={action} data-action={action}>
                <strong>{action}</strong>: {d.published.toLocaleString('en')} networks published → {d.held.toLocaleString('en')} in the held build
                {' '}(<span class="removed">{d.removed.toLocaleString('en')} removed</span>, <span class="added">{d.added.toLocaleString('en')} added</span>)
                {d.removed_sample.length > 0 && <p class="sample">Removed, for example: {d.removed_sample.map((n) => <code key={n}>{n}</code>)}{d.removed > d.removed_sample.length && <span class="muted"> and {(d.removed - d.removed_sample.length).toLocaleString('en')} more</span>}</p>}
                {d.added_sample.length > 0 && <p class="sample">Added, for example: {d.added_sample.map((n) => <code key={n}>{n}</code>)}{d.added > d.added_sample.length && <span class="muted"> and {(d.added - d.added_sample.length).toLocaleString('en')} more</span>}</p>}
              </li>
            ))}
          </ul>
          )}
    </div>
  )
}
