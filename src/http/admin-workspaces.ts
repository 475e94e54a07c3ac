/** /v1/admin/workspaces and /v1/admin/keys (docs/admin-api.md): tenancy through the admin API. */
import { ThreatfeedError } from '../errors.js'
import { generateApiKey, hashApiKey } from '../store/api-key.js'
import { WORKSPACE_FEED } from '../feed/snapshot-types.js'
import { FEED_ACTIONS, type BouncerSetting, type FeedAction, type PublishState, type Scope, type Store, type Subscription, type Workspace } from '../store/types.js'
import { mayAccess, workspaceFor } from './admin-access.js'
import { invalid, readJson, readQuery, sendAdmin, validateBody, type AdminCall, type AdminRoute } from './admin-io.js'
import type { AdminJournal } from './admin-journal.js'
import { guardsFromBody, lastModifiedOf, showKey, showWorkspace, type GuardsBody } from '../feed/admin-shapes.js'

const WORKSPACES = '/v1/admin/workspaces'
const KEYS = '/v1/admin/keys'

async function liveWorkspace (store: Store, id: string): Promise<Workspace> {
  const w = await store.workspaces.get(id)
  if (w === null || w.deletedAt !== null) throw new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', [id])
  return w
}

/** The workspace feed's publish state as its guard last recorded it (feed/guards-persist.ts). */
async function workspaceFeedState (store: Store, workspaceId: string): Promise<PublishState | null> {
  return (await store.feedVersions.loadPublished({ workspaceId, listId: WORKSPACE_FEED }))?.state ?? null
}

export function workspaceRoutes (store: Store, journal: AdminJournal): AdminRoute[] {
  const audit = (call: AdminCall, action: string, target: string, workspaceId: string, status: number): Promise<void> =>
    journal.audit({ keyId: call.caller.key.id, address: call.caller.address, action, target, workspaceId, status })
  return [
    {
      // The key a session signed in with, so a console can mark it (never the key itself).
      method: 'get', pattern: '/v1/admin/whoami', route: 'admin_whoami',
      async handle (call) {
        readQuery(call.query, [])
        sendAdmin(call.ex, 200, { key_id: call.caller.key.id, workspace: call.caller.workspace.id, scopes: call.caller.key.scopes })
      },
    },
    {
      method: 'get', pattern: WORKSPACES, route: 'admin_workspaces',
      async handle (call) {
        readQuery(call.query, [])
        const all = call.caller.all ? (await store.workspaces.list()).filter((w) => w.deletedAt === null) : [await liveWorkspace(store, call.caller.workspace.id)]
        sendAdmin(call.ex, 200, { items: all.map((w) => showWorkspace(w)) })
      },
    },
    {
      method: 'get', pattern: `${WORKSPACES}/:id`, route: 'admin_workspace',
      async handle (call) {
        const w = await workspaceFor(store, call.caller, call.params[0])
        const state = await workspaceFeedState(store, w.id)
        sendAdmin(call.ex, 200, showWorkspace(await liveWorkspace(store, w.id), { state, lastModified: await lastModifiedOf(store.feedVersions, w.id, WORKSPACE_FEED, state) }))
      },
    },
    {
      // `list accept` for the workspace feed (/v1/threat/feeds), whose guards `workspace update`
      // sets: an `admin` key accepts its own workspace's, `admin:all` any workspace's.
      method: 'post', pattern: `${WORKSPACES}/:id/accept`, route: 'admin_workspace_accept', audit: 'workspace.accept',
      async handle (call) {
        const body = validateBody<{ digest?: string }>('admin-list-accept', await readJson(call))
        const w = await liveWorkspace(store, (await workspaceFor(store, call.caller, call.params[0])).id)
        const held = (await workspaceFeedState(store, w.id))?.held ?? null
        if (held === null) throw new ThreatfeedError('TF_ERR_STORE_CONFLICT', [`the feed of workspace ${w.id} has no held build`])
        if (body.digest !== undefined && body.digest !== held.digest) {
          throw new ThreatfeedError('TF_ERR_STORE_CONFLICT', [`the held build of the feed of workspace ${w.id} is ${held.digest}, not ${body.digest}; nothing accepted`])
        }
        // Recorded by digest with the guards, as for a list: every node publishes this build.
        await store.workspaces.update(w.id, { feedGuards: { ...w.feedGuards, accepted: held.digest } })
        await call.changed()
        await audit(call, 'workspace.accept', w.id, w.id, 200)
        sendAdmin(call.ex, 200, { id: w.id, accepted: held.digest })
      },
    },
    {
      method: 'post', pattern: WORKSPACES, route: 'admin_workspaces', needAll: true, audit: 'workspace.create',
      async handle (call) {
        const body = validateBody<{ name: string, subscription?: Subscription }>('admin-workspace-create', await readJson(call))
        const w = await store.workspaces.create({ name: body.name, subscription: body.subscription ?? 'active' })
        await call.changed()
        await audit(call, 'workspace.create', w.id, w.id, 201)
        sendAdmin(call.ex, 201, showWorkspace(w))
      },
    },
    {
      method: 'patch', pattern: `${WORKSPACES}/:id`, route: 'admin_workspace', needAll: true, audit: 'workspace.update',
      async handle (call) {
        const id = call.params[0]!
        const body = validateBody<{ name?: string, subscription?: Subscription, guards?: GuardsBody | null }>('admin-workspace-update', await readJson(call))
        const current = await liveWorkspace(store, id)
        const patch: Parameters<Store['workspaces']['update']>[1] = {}
        if (body.name !== undefined) patch.name = body.name
        if (body.subscription !== undefined) patch.subscription = body.subscription
        if (body.guards === null) patch.feedGuards = null
        else if (body.guards !== undefined) {
          // Merged, as `workspace update` and a list's PATCH merge: an accepted digest stays until a new build.
          const merged = { ...current.feedGuards, ...guardsFromBody(body.guards) }
          patch.feedGuards = Object.keys(merged).length === 0 ? null : merged
        }
        const w = await store.workspaces.update(id, patch)
        if (w === null) throw new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', [id])
        await call.changed()
        await audit(call, 'workspace.update', id, id, 200)
        sendAdmin(call.ex, 200, showWorkspace(w))
      },
    },
    {
      method: 'del', pattern: `${WORKSPACES}/:id`, route: 'admin_workspace', needAll: true, audit: 'workspace.delete',
      async handle (call) {
        const id = call.params[0]!
        if (!await store.workspaces.delete(id)) throw new ThreatfeedError('TF_ERR_WORKSPACE_NOT_FOUND', [id])
        await call.changed()
        await audit(call, 'workspace.delete', id, id, 200)
        sendAdmin(call.ex, 200, { id, deleted: true })
      },
    },
    {
      method: 'get', pattern: KEYS, route: 'admin_keys',
      async handle (call) {
        const q = readQuery(call.query, ['workspace'])
        const w = await workspaceFor(store, call.caller, q.get('workspace') ?? undefined)
        const keys = await store.keys.list(w.id)
        sendAdmin(call.ex, 200, { items: keys.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id)).map(showKey) })
      },
    },
    {
      method: 'post', pattern: KEYS, route: 'admin_keys', audit: 'key.create',
      async handle (call) {
        const body = validateBody<{ workspace?: string, scopes: Scope[] }>('admin-key-create', await readJson(call))
        // admin:all crosses workspaces: made only on the server's machine (`threatfeed key create`).
        if (body.scopes.includes('admin:all')) throw new ThreatfeedError('TF_ERR_ADMIN_ALL_LOCAL')
        const w = await workspaceFor(store, call.caller, body.workspace)
        const key = generateApiKey()
        const created = await store.keys.create({ workspaceId: w.id, hash: hashApiKey(key), scopes: body.scopes })
        await call.changed()
        await audit(call, 'key.create', created.id, w.id, 201)
        sendAdmin(call.ex, 201, { ...showKey(created), key })
      },
    },
    {
      // What the key's CrowdSec bouncers receive (docs/bouncers.md): {"list": ID or null, "action"}; DELETE: the default.
      method: 'put', pattern: `${KEYS}/:id/bouncer`, route: 'admin_key_bouncer', audit: 'key.bouncer',
      async handle (call) {
        const id = call.params[0]!
        const k = await store.keys.get(id)
        if (k === null || k.revokedAt !== null || !mayAccess(call.caller, k.workspaceId)) throw new ThreatfeedError('TF_ERR_KEY_NOT_FOUND', [id])
        const setting = await bouncerSettingOf(store, k.workspaceId, await readJson(call))
        const updated = await store.keys.setBouncer(id, setting)
        if (updated === null) throw new ThreatfeedError('TF_ERR_KEY_NOT_FOUND', [id])
        await call.changed()
        await audit(call, 'key.bouncer', id, k.workspaceId, 200)
        sendAdmin(call.ex, 200, showKey(updated))
      },
    },
    {
      method: 'del', pattern: `${KEYS}/:id/bouncer`, route: 'admin_key_bouncer', audit: 'key.bouncer',
      async handle (call) {
        const id = call.params[0]!
        const k = await store.keys.get(id)
        if (k === null || k.revokedAt !== null || !mayAccess(call.caller, k.workspaceId)) throw new ThreatfeedError('TF_ERR_KEY_NOT_FOUND', [id])
        const updated = await store.keys.setBouncer(id, null)
        if (updated === null) throw new ThreatfeedError('TF_ERR_KEY_NOT_FOUND', [id])
        await call.changed()
        await audit(call, 'key.bouncer', id, k.workspaceId, 200)
        sendAdmin(call.ex, 200, showKey(updated))
      },
    },
    {
      method: 'del', pattern: `${KEYS}/:id`, route: 'admin_key', audit: 'key.revoke',
      async handle (call) {
        const id = call.params[0]!
        const k = await store.keys.get(id)
        if (k === null || !mayAccess(call.caller, k.workspaceId)) throw new ThreatfeedError('TF_ERR_KEY_NOT_FOUND', [id])
        const already = k.revokedAt !== null || !await store.keys.revoke(id)
        await call.changed()
        await audit(call, 'key.revoke', id, k.workspaceId, 200)
        sendAdmin(call.ex, 200, { id, revoked: true, already_revoked: already })
      },
    },
  ]
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A bouncer setting from its body: `list` a list of the key's workspace by id or name (null or absent: the workspace feed), `action` block (default) or allow. */
async function bouncerSettingOf (store: Store, workspaceId: string, body: unknown): Promise<BouncerSetting> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid([{ field: '', message: 'must be an object', value: body }])
  const b = body as Record<string, unknown>
  for (const k of Object.keys(b)) if (k !== 'list' && k !== 'action') throw invalid([{ field: k, message: 'is not a field of a bouncer setting (list, action)', value: b[k] }])
  const action = b.action ?? 'block'
  if (typeof action !== 'string' || !(FEED_ACTIONS as readonly string[]).includes(action)) throw invalid([{ field: 'action', message: `must be one of ${FEED_ACTIONS.join(', ')}`, value: action }])
  const ref = b.list ?? null
  if (ref !== null && (typeof ref !== 'string' || ref === '' || ref.length > 256)) throw invalid([{ field: 'list', message: 'must be a list id or name, or null', value: ref }])
  if (ref === null) return { listId: null, action: action as FeedAction }
  const byId = UUID.test(ref) ? await store.lists.get(ref.toLowerCase()) : null
  if (byId !== null && byId.workspaceId === workspaceId) return { listId: byId.id, action: action as FeedAction }
  const named = await store.lists.findByName(workspaceId, ref)
  if (named.length === 0) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
  if (named.length > 1) throw new ThreatfeedError('TF_ERR_LIST_AMBIGUOUS')
  return { listId: named[0]!.id, action: action as FeedAction }
}
