/**
 * Workspaces and lists from the catalog (catalog.ts) onto the feed service's state: feeds appear,
 * change and disappear with them. A list whose updatedAt moved, or a workspace renamed, is rebuilt;
 * a deleted one is dropped.
 */
import type { AccessList, Workspace } from '../store/types.js'
import type { CatalogView } from './catalog.js'
import { FeedState, type WorkspaceState } from './feed-state.js'
import type { BuildReason } from './metrics.js'
import { WORKSPACE_FEED } from './snapshot-types.js'

/** What syncAdmin changes: the service's workspaces, and its operations on them. */
export interface AdminTarget {
  readonly workspaces: ReadonlyMap<string, WorkspaceState>
  /** The workspace's state, created (with its workspace feed) on first sight. */
  workspace (id: string): WorkspaceState
  dropWorkspace (ws: WorkspaceState): void
  dropFeed (ws: WorkspaceState, f: FeedState): void
  markDirty (f: FeedState, reason: BuildReason): void
  tick (f: FeedState): void
}

export function syncAdmin (view: CatalogView, to: AdminTarget): void {
  const { workspaces, lists } = view.data
  const live = new Map<string, Workspace>()
  for (const w of workspaces) if (w.deletedAt === null) live.set(w.id, w)
  for (const [id, ws] of to.workspaces) {
    if (!live.has(id)) to.dropWorkspace(ws)
  }
  const listsByWorkspace = new Map<string, AccessList[]>()
  for (const l of lists) {
    const a = listsByWorkspace.get(l.workspaceId)
    if (a === undefined) listsByWorkspace.set(l.workspaceId, [l])
    else a.push(l)
  }
  for (const w of live.values()) {
    const ws = to.workspace(w.id)
    ws.active = w.subscription === 'active'
    const guardsJson = JSON.stringify(w.feedGuards ?? null)
    if (guardsJson !== ws.guardsJson) {
      if (ws.guardsJson !== '') to.markDirty(ws.feeds.get(WORKSPACE_FEED)!, 'change')
      ws.guards = w.feedGuards
      ws.guardsJson = guardsJson
    }
    if (ws.name !== w.name) {
      if (ws.name !== null) to.markDirty(ws.feeds.get(WORKSPACE_FEED)!, 'change')
      ws.name = w.name
    }
    const current = listsByWorkspace.get(w.id) ?? []
    const ids = new Set(current.map((l) => l.id))
    for (const [id, f] of ws.feeds) {
      if (id !== WORKSPACE_FEED && !ids.has(id)) to.dropFeed(ws, f)
    }
    for (const l of current) {
      let f = ws.feeds.get(l.id)
      if (f === undefined) {
        f = new FeedState(w.id, l.id)
        f.list = l
        ws.feeds.set(l.id, f)
      } else if (f.list === null || f.list.updatedAt !== l.updatedAt) {
        const had = f.list !== null
        f.list = l
        f.missing = false
        if (had) to.markDirty(f, 'change')
        else to.tick(f)
      }
    }
  }
}
