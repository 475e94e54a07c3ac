/**
 * The admin API's part of /openapi.json (docs/admin-api.md): its paths and its body schemas —
 * the very schemas the compiled validators enforce (admin-schemas.ts), references rewritten to
 * components.
 */
import { adminSchemas } from './admin-schemas.js'

/** `{ $ref: 'admin-guards' }` → `{ $ref: '#/components/schemas/admin-guards' }`, `$id` dropped. */
function asComponent (v: unknown): unknown {
  if (Array.isArray(v)) return v.map(asComponent)
  if (typeof v !== 'object' || v === null) return v
  const out: Record<string, unknown> = {}
  for (const [k, x] of Object.entries(v)) {
    if (k === '$id') continue
    out[k] = k === '$ref' && typeof x === 'string' ? `#/components/schemas/${x}` : asComponent(x)
  }
  return out
}

const json = (schema: unknown) => ({ 'application/json': { schema } })
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const anyObject = { type: 'object' }
const page = { type: 'object', required: ['items', 'next_cursor'], properties: { items: { type: 'array', items: anyObject }, next_cursor: { type: ['string', 'null'] } } }
const items = { type: 'object', required: ['items'], properties: { items: { type: 'array', items: anyObject } } }
const count = { type: 'integer', minimum: 0 }
const iso = { type: 'string', format: 'date-time' }
const nullable = (type: string, extra: Record<string, unknown> = {}) => ({ type: [type, 'null'], ...extra })
/** One consumer: also each element of `threatfeed consumers ls --json` (src/feed/consumer-status.ts ConsumerView). */
const consumer = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'workspace', 'key_id', 'address', 'user_agent', 'client', 'list', 'list_name', 'variant', 'stale', 'stale_reason', 'first_seen', 'last_seen', 'last_status', 'last_200', 'polls_per_hour', 'median_interval_seconds', 'behind', 'versions_behind', 'polls'],
  properties: {
    id: { type: 'string' },
    workspace: { type: 'string' },
    key_id: { type: 'string' },
    address: { type: 'string' },
    user_agent: { type: 'string' },
    client: nullable('string', { description: 'The ?client= name' }),
    list: { type: 'string', description: 'A list id, or * for the workspace feed' },
    list_name: nullable('string', { description: 'null for the workspace feed' }),
    variant: { type: 'string', description: 'format|family|action|checksum[|shard/of]; empty before an answered poll' },
    stale: { type: 'boolean' },
    stale_reason: { enum: ['silent', 'failing', null] },
    first_seen: iso,
    last_seen: iso,
    last_status: { type: 'integer' },
    last_200: { ...nullable('string'), format: 'date-time' },
    polls_per_hour: nullable('number'),
    median_interval_seconds: nullable('number'),
    behind: nullable('boolean', { description: 'null: unknown' }),
    versions_behind: nullable('integer'),
    polls: {
      type: 'object',
      required: ['total', 'ok', 'not_modified', 'client_errors', 'server_errors'],
      properties: { total: count, ok: count, not_modified: count, client_errors: count, server_errors: count },
    },
  },
}
const whoami = { type: 'object', required: ['key_id', 'workspace', 'scopes'], properties: { key_id: { type: 'string' }, workspace: { type: 'string' }, scopes: { type: 'array', items: { type: 'string' } } } }
const consumers = {
  type: 'object',
  required: ['items', 'dropped'],
  properties: {
    items: { type: 'array', items: consumer },
    dropped: { type: 'object', required: ['evicted', 'refused', 'removed'], properties: { evicted: count, refused: count, removed: count } },
  },
}

const ERRORS = {
  400: 'Invalid body or query (details name each problem)',
  401: 'Invalid or missing API key',
  403: 'The key lacks admin (or admin:all where needed)',
  404: 'No such object, or one of another workspace',
  429: 'Too many failed authentications from this address (Retry-After)',
  500: 'Server error; retry with backoff',
} as const

function operation (summary: string, ok: [number, unknown], extra: { body?: string, params?: unknown[], errors?: Array<keyof typeof ERRORS | 405 | 409> } = {}) {
  const responses: Record<string, unknown> = { [ok[0]]: { description: 'OK', content: json(ok[1]) } }
  for (const code of extra.errors ?? [400, 401, 403, 404, 429, 500]) {
    responses[code] = { description: code === 409 ? 'Nothing held, or another build is held' : code === 405 ? 'Method not allowed' : ERRORS[code], content: json(ref('ErrorBody')) }
  }
  return {
    summary,
    operationId: summary.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase()).replace(/^./, (c) => c.toLowerCase()),
    tags: ['admin'],
    security: [{ bearer: [] }],
    ...(extra.params === undefined ? {} : { parameters: extra.params }),
    ...(extra.body === undefined ? {} : { requestBody: { required: true, content: json(ref(extra.body)) } }),
    responses,
  }
}

const q = (name: string, description: string, schema: unknown = { type: 'string' }) => ({ name, in: 'query', required: false, description, schema })
const idParam = { name: 'id', in: 'path', required: true, description: 'The object id', schema: { type: 'string' } }
const workspace = q('workspace', 'A workspace id (admin:all); absent: the key\'s own')
const paging = [q('limit', '1..500, default 100', { type: 'integer', minimum: 1, maximum: 500 }), q('cursor', 'next_cursor of the previous page')]

export const adminOpenApiSchemas = Object.fromEntries(Object.entries(adminSchemas).map(([name, s]) => [name, asComponent(s)]))

export const adminOpenApiPaths = {
  '/v1/admin/whoami': { get: operation('The key this request is made with', [200, whoami], { params: [], errors: [401, 403, 429, 500] }) },
  '/v1/admin/workspaces': {
    get: operation('List workspaces', [200, items], { params: [] }),
    post: operation('Create a workspace (admin:all)', [201, anyObject], { body: 'admin-workspace-create' }),
  },
  '/v1/admin/workspaces/{id}': {
    get: operation('Show a workspace', [200, anyObject], { params: [idParam] }),
    patch: operation('Update a workspace (admin:all)', [200, anyObject], { params: [idParam], body: 'admin-workspace-update' }),
    delete: operation('Delete a workspace (admin:all)', [200, anyObject], { params: [idParam] }),
  },
  '/v1/admin/workspaces/{id}/accept': {
    post: operation('Accept the workspace feed\'s held build', [200, anyObject], { params: [idParam], body: 'admin-list-accept', errors: [400, 401, 403, 404, 409, 429, 500] }),
  },
  '/v1/admin/keys': {
    get: operation('List keys', [200, items], { params: [workspace] }),
    post: operation('Create a key (shown once)', [201, anyObject], { body: 'admin-key-create' }),
  },
  '/v1/admin/keys/{id}': { delete: operation('Revoke a key', [200, anyObject], { params: [idParam] }) },
  '/v1/admin/keys/{id}/bouncer': {
    put: operation('Set what the key\'s CrowdSec bouncers receive (docs/bouncers.md): body {"list": id, name or null, "action": "block" or "allow"}', [200, anyObject], { params: [idParam] }),
    delete: operation('Back to the default bouncer set: the workspace feed\'s block networks', [200, anyObject], { params: [idParam] }),
  },
  '/v1/admin/lists': {
    get: operation('List lists', [200, items], { params: [workspace] }),
    post: operation('Create a list', [201, anyObject], { body: 'admin-list-create' }),
  },
  '/v1/admin/lists/{id}': {
    get: operation('Show a list', [200, anyObject], { params: [idParam] }),
    patch: operation('Update a list', [200, anyObject], { params: [idParam], body: 'admin-list-update' }),
    delete: operation('Delete a list', [200, anyObject], { params: [idParam] }),
  },
  '/v1/admin/lists/{id}/accept': {
    post: operation('Accept a held build', [200, anyObject], { params: [idParam], body: 'admin-list-accept', errors: [400, 401, 403, 404, 409, 429, 500] }),
  },
  '/v1/admin/rules': {
    get: operation('Search rules', [200, page], {
      params: [workspace, q('kind', 'access_rule (default), waf_rule, smart_firewall_rule'), q('target', 'IP/CIDR, AS<n> or a country code'), q('rule_ref', 'exact rule_ref'), { ...q('label', 'key=value, repeatable', { type: 'array', items: { type: 'string' } }), explode: true }, ...paging],
    }),
  },
  '/v1/admin/consumers': { get: operation('List feed consumers', [200, consumers], { params: [workspace, q('list', 'a list id, or * for the workspace feed')] }) },
  '/v1/admin/batches': { get: operation('Recent signal batches', [200, page], { params: [workspace, q('failed', 'true: batches with failures only', { type: 'boolean' }), ...paging] }) },
  '/v1/admin/feed-versions': { get: operation('Feed sizes per variant, hourly over 30 days', [200, items], { params: [workspace, q('list', 'a list id, or * for the workspace feed')] }) },
  '/v1/admin/explain': {
    get: operation('Explain an address in a workspace\'s feeds', [200, anyObject], {
      params: [workspace, { ...q('ip', 'One IPv4 or IPv6 address'), required: true }, q('list', 'A list id or name; absent: every feed')],
    }),
  },
  '/v1/admin/audit': {
    get: {
      ...operation('The audit log', [200, anyObject], { params: [workspace, ...paging] }),
      responses: {
        200: { description: 'JSON lines, newest first; X-Next-Cursor names the next page', headers: { 'X-Next-Cursor': { description: 'The next page\'s cursor', schema: { type: 'string' } } }, content: { 'application/x-ndjson': { schema: { type: 'string' } } } },
        ...Object.fromEntries([400, 401, 403, 404, 429, 500].map((c) => [c, { description: ERRORS[c as keyof typeof ERRORS], content: json(ref('ErrorBody')) }])),
      },
    },
  },
}
