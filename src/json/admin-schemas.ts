/**
 * JSON Schemas of the admin API's request bodies (docs/admin-api.md, issue 22): the one source of
 * truth. scripts/generate-validators.ts compiles them into src/json/generated/admin-validators.ts
 * and /openapi.json embeds them unchanged, so what is documented is what is enforced.
 *
 * The limits are the CLI's (`threatfeed list create|update`, `workspace create`): names up to 200
 * characters and descriptions up to 1000, neither with control characters (they land in the
 * dialect_a header); max_entries 1..100,000,000; shards 1..64; the guards' ranges of
 * src/cli/guard-flags.ts. What needs code stays in src/http/admin-lists.ts (nftables needs one
 * family, on the defaults after an update merges them).
 */

/** No C0/C1 control characters, no line or paragraph separators (the CLI's checkText). */
const NO_CONTROL = '^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$'

const name = { type: 'string', minLength: 1, maxLength: 200, pattern: NO_CONTROL } as const
const description = { type: 'string', maxLength: 1000, pattern: NO_CONTROL } as const
const subscription = { enum: ['active', 'inactive'] } as const
const id = { type: 'string', minLength: 1, maxLength: 64 } as const

const guards = {
  $id: 'admin-guards',
  type: 'object',
  additionalProperties: false,
  properties: {
    min_entries: { type: 'integer', minimum: 1, maximum: 100_000_000 },
    max_shrink_pct: { type: 'integer', minimum: 0, maximum: 100 },
    max_grow_pct: { type: 'integer', minimum: 0, maximum: 1_000_000 },
    reject_special: { type: 'boolean' },
    mode: { enum: ['hold', 'drop'] },
    min_prefix_v4: { type: 'integer', minimum: 0, maximum: 32 },
    min_prefix_v6: { type: 'integer', minimum: 0, maximum: 128 },
  },
} as const

const selector = {
  type: 'object',
  maxProperties: 64,
  propertyNames: { minLength: 1, maxLength: 128, pattern: '^(?!\\$)(?!__proto__$)(?!constructor$)(?!prototype$)[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$' },
  additionalProperties: { type: 'string', maxLength: 1024, pattern: NO_CONTROL },
} as const

const listFields = {
  name,
  description,
  format: { enum: ['plain', 'dialect_a', 'dialect_b', 'nftables'] },
  family: { enum: ['v4', 'v6', 'both'] },
  action: { enum: ['block', 'allow'] },
  max_entries: { type: 'integer', minimum: 1, maximum: 100_000_000 },
  confidence: { enum: ['low', 'medium', 'high'] },
  severity: { enum: ['low', 'medium', 'high', 'critical'] },
  shards: { type: 'integer', minimum: 1, maximum: 64 },
  selector,
} as const

export const adminSchemas = {
  'admin-guards': guards,
  'admin-workspace-create': {
    $id: 'admin-workspace-create',
    type: 'object',
    additionalProperties: false,
    required: ['name'],
    properties: { name, subscription },
  },
  'admin-workspace-update': {
    $id: 'admin-workspace-update',
    type: 'object',
    additionalProperties: false,
    minProperties: 1,
    properties: { name, subscription, guards: { anyOf: [{ $ref: 'admin-guards' }, { type: 'null' }] } },
  },
  'admin-key-create': {
    $id: 'admin-key-create',
    type: 'object',
    additionalProperties: false,
    required: ['scopes'],
    properties: {
      workspace: id,
      scopes: { type: 'array', minItems: 1, maxItems: 5, uniqueItems: true, items: { enum: ['signals:write', 'feeds:read', 'rules:read', 'admin', 'admin:all'] } },
    },
  },
  'admin-list-create': {
    $id: 'admin-list-create',
    type: 'object',
    additionalProperties: false,
    required: ['name'],
    properties: { workspace: id, ...listFields, guards: { $ref: 'admin-guards' } },
  },
  'admin-list-update': {
    $id: 'admin-list-update',
    type: 'object',
    additionalProperties: false,
    minProperties: 1,
    properties: { ...listFields, guards: { anyOf: [{ $ref: 'admin-guards' }, { type: 'null' }] } },
  },
  'admin-list-accept': {
    $id: 'admin-list-accept',
    type: 'object',
    additionalProperties: false,
    properties: { digest: { type: 'string', minLength: 1, maxLength: 200 } },
  },
} as const

export type AdminSchemaName = keyof typeof adminSchemas
