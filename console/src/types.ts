/** The admin API's answers as the console reads them (docs/admin-api.md). */
export interface Page<T> { items: T[], next_cursor?: string | null }

export interface Workspace { id: string, name: string, subscription: string }
/** GET /v1/admin/workspaces/ID: with the workspace feed's guards and publish state. */
export interface WorkspaceDetail extends Workspace { guards: Guards | null, publish?: Publish }

/** A feed's publish state; last_modified null: it never published (never built, or held before its first publish). */
export interface Publish { last_modified: string | null, published_digest: string | null, held: Held | null }

export interface Guards {
  min_entries?: number | null
  max_shrink_pct?: number | null
  max_grow_pct?: number | null
  reject_special?: boolean | null
  mode?: 'hold' | 'drop' | null
  min_prefix_v4?: number | null
  min_prefix_v6?: number | null
  accepted?: string | null
}

export interface ActionDiff { published: number, held: number, added: number, removed: number, added_sample: string[], removed_sample: string[] }
export interface Held { digest: string, guards: Record<string, string>, since: string, diff?: Record<string, ActionDiff> }

export interface List {
  id: string
  workspace: string
  name: string
  description: string
  /** Only what was set on the list; the rest is the server's default (effectiveDefaults). */
  defaults: { format?: string, family?: string, action?: string, max_entries?: number, confidence?: string | null, severity?: string | null, shards?: number | null }
  guards: Guards | null
  selector: Record<string, string> | null
  created_at: string
  updated_at: string
  publish?: Publish
}

/** at: the hour sampled; last_modified: when the content last changed (null on points from before it was kept). */
export interface Point { at: string, entries: number, bytes: number, gzip_bytes?: number, changes?: number, last_modified?: string | null }
export interface History { list: string, variant: string, points: Point[] }

/** GET /v1/admin/consumers items, the same as `consumers ls --json`. */
export interface Consumer {
  id: string
  key_id: string
  address: string
  user_agent: string
  client: string | null
  list: string
  list_name: string | null
  variant: string
  polls: { total: number, ok: number, not_modified: number, client_errors: number, server_errors: number }
  last_seen: string
  last_status: number
  stale: boolean
  stale_reason: string | null
  behind: boolean | null
  versions_behind: number | null
}

export interface Whoami { key_id: string, workspace: string, scopes: string[] }

export interface Batch {
  id: string
  at: string
  api: string
  /** The id of the key that posted it; null for batches kept from before it was recorded. */
  key_id: string | null
  entries: number
  accepted: number
  failed: number
  status: number
  errors: string[]
  errors_truncated: number
}

export interface Key { id: string, workspace: string, scopes: string[], created_at: string, revoked_at: string | null }
export interface CreatedKey extends Key { key: string }
