/**
 * /v1/admin/lists (docs/admin-api.md): the API twin of `threatfeed list create|update|delete|
 * show|accept|ls`, with the same limits (src/json/admin-schemas.ts) and the same rules written in
 * code: nftables needs one family (on the defaults after an update merges them), guards merge
 * into the current ones, accept names the held build's digest.
 */
import { ThreatfeedError } from '../errors.js'
import type { AccessList, ListDefaults, Store } from '../store/types.js'
import { mayAccess, workspaceFor } from './admin-access.js'
import { invalid, readJson, readQuery, sendAdmin, validateBody, type AdminCall, type AdminRoute } from './admin-io.js'
import type { AdminJournal } from './admin-journal.js'
import { defaultsFromBody, guardsFromBody, lastModifiedOf, showList, type DefaultsBody, type GuardsBody } from '../feed/admin-shapes.js'

const LISTS = '/v1/admin/lists'

interface ListFields extends DefaultsBody {
  name?: string
  description?: string
  selector?: Record<string, string>
}

interface ListCreate extends ListFields { workspace?: string, name: string, guards?: GuardsBody }
interface ListUpdate extends ListFields { guards?: GuardsBody | null }

/** The defaults a body sets, over `base`. */
function defaultsOf (b: ListFields, base: ListDefaults): ListDefaults {
  const d = defaultsFromBody(b, base)
  if (d.format === 'nftables' && (d.family ?? 'both') === 'both') {
    throw invalid([{ field: 'family', message: 'format nftables needs family v4 or v6 (an nftables set holds one family)', value: d.family ?? null }])
  }
  return d
}

async function listOf (store: Store, call: AdminCall): Promise<AccessList> {
  const id = call.params[0]!
  const l = await store.lists.get(id)
  if (l === null || !mayAccess(call.caller, l.workspaceId)) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
  return l
}

export function listRoutes (store: Store, journal: AdminJournal): AdminRoute[] {
  const show = async (l: AccessList): Promise<Record<string, unknown>> => showList(l, await lastModifiedOf(store.feedVersions, l.workspaceId, l.id, l.publishState))
  const audit = (call: AdminCall, action: string, target: string, workspaceId: string, status: number): Promise<void> =>
    journal.audit({ keyId: call.caller.key.id, address: call.caller.address, action, target, workspaceId, status })
  return [
    {
      method: 'get', pattern: LISTS, route: 'admin_lists',
      async handle (call) {
        const q = readQuery(call.query, ['workspace'])
        const w = await workspaceFor(store, call.caller, q.get('workspace') ?? undefined)
        const lists = await store.lists.list(w.id)
        sendAdmin(call.ex, 200, { items: await Promise.all(lists.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id)).map(show)) })
      },
    },
    {
      method: 'get', pattern: `${LISTS}/:id`, route: 'admin_list',
      async handle (call) {
        sendAdmin(call.ex, 200, await show(await listOf(store, call)))
      },
    },
    {
      method: 'post', pattern: LISTS, route: 'admin_lists', audit: 'list.create',
      async handle (call) {
        const body = validateBody<ListCreate>('admin-list-create', await readJson(call))
        const w = await workspaceFor(store, call.caller, body.workspace)
        const defaults = defaultsOf(body, {})
        if (body.guards !== undefined && Object.keys(body.guards).length > 0) defaults.guards = guardsFromBody(body.guards)
        const l = await store.lists.create({ workspaceId: w.id, name: body.name, description: body.description ?? '', defaults, selector: { ...body.selector } })
        await call.changed()
        await audit(call, 'list.create', l.id, w.id, 201)
        sendAdmin(call.ex, 201, await show(l))
      },
    },
    {
      method: 'patch', pattern: `${LISTS}/:id`, route: 'admin_list', audit: 'list.update',
      async handle (call) {
        const body = validateBody<ListUpdate>('admin-list-update', await readJson(call))
        const current = await listOf(store, call)
        const patch: Partial<Pick<AccessList, 'name' | 'description' | 'defaults' | 'selector'>> = {}
        if (body.name !== undefined) patch.name = body.name
        if (body.description !== undefined) patch.description = body.description
        if (body.selector !== undefined) patch.selector = { ...body.selector }
        const defaults = defaultsOf(body, current.defaults)
        if (body.guards === null) delete defaults.guards
        else if (body.guards !== undefined) {
          // Merged as `list update` merges its flags; an accepted digest stays until a new build.
          const merged = { ...current.defaults.guards, ...guardsFromBody(body.guards) }
          if (Object.keys(merged).length > 0) defaults.guards = merged
        }
        patch.defaults = defaults
        const l = await store.lists.update(current.id, patch)
        if (l === null) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
        await call.changed()
        await audit(call, 'list.update', l.id, l.workspaceId, 200)
        sendAdmin(call.ex, 200, await show(l))
      },
    },
    {
      method: 'del', pattern: `${LISTS}/:id`, route: 'admin_list', audit: 'list.delete',
      async handle (call) {
        const l = await listOf(store, call)
        if (!await store.lists.delete(l.id)) throw new ThreatfeedError('TF_ERR_LIST_NOT_FOUND')
        await call.changed()
        await audit(call, 'list.delete', l.id, l.workspaceId, 200)
        sendAdmin(call.ex, 200, { id: l.id, deleted: true })
      },
    },
    {
      method: 'post', pattern: `${LISTS}/:id/accept`, route: 'admin_list_accept', audit: 'list.accept',
      async handle (call) {
        const body = validateBody<{ digest?: string }>('admin-list-accept', await readJson(call))
        const current = await listOf(store, call)
        const held = current.publishState?.held ?? null
        if (held === null) throw new ThreatfeedError('TF_ERR_STORE_CONFLICT', [`list ${current.id} has no held build`])
        if (body.digest !== undefined && body.digest !== held.digest) {
          throw new ThreatfeedError('TF_ERR_STORE_CONFLICT', [`the held build of list ${current.id} is ${held.digest}, not ${body.digest}; nothing accepted`])
        }
        // As `threatfeed list accept`: recorded by digest, so every node publishes this build.
        await store.lists.update(current.id, { defaults: { ...current.defaults, guards: { ...current.defaults.guards, accepted: held.digest } } })
        await call.changed()
        await audit(call, 'list.accept', current.id, current.workspaceId, 200)
        sendAdmin(call.ex, 200, { id: current.id, accepted: held.digest })
      },
    },
  ]
}
