/**
 * JSON Schemas of the signal interface (SPEC 2.1–2.4): the one source of truth for the v1 event,
 * the v2 envelope and both v2 rule bodies. Ajv compiles them (src/ingest/validators.ts) and the
 * OpenAPI document (src/ingest/openapi.ts) embeds them unchanged, so what is documented is what is
 * enforced.
 *
 * The schemas check shape and types; rules that need code stay in normalize-*.ts: "exactly one of
 * ip, asn, country" (an empty string counts as absent, which JSON Schema can say only in a way whose
 * errors nobody could read), target normalization, ASN existence, country assignment, expression
 * checking and the expiry policy.
 *
 * Case-insensitive enumerations (rule.type, rule.action, rule.phase, labels.confidence …) are
 * written as generated case-folding patterns so that any JSON Schema consumer of the OpenAPI
 * document enforces the same thing; `PATTERN_MESSAGES` gives Ajv errors on them a readable text.
 */

/** rule_ref: SPEC 2.2, at most 128 characters. */
export const RULE_REF_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'
/** Expiry values above this (about 68 years) are refused: they are typos, not policies. */
export const MAX_EXPIRY_SECONDS = 2_147_483_647
export const MAX_BATCH_ENTRIES = 1000
export const MAX_LABELS = 64
export const MAX_LABELS_JSON_BYTES = 4096
const MAX_TEXT = 8192

/** Pattern text → the message an entry gets when a value does not match it. */
export const PATTERN_MESSAGES = new Map<string, string>([[RULE_REF_PATTERN, `must match ${RULE_REF_PATTERN}`]])

/**
 * A pattern matching exactly one of `values`, any letter case: `ciEnum(['ab'])` → `^(?:[aA][bB])$`.
 */
function ciEnum (values: readonly string[]): { type: 'string', pattern: string, description: string } {
  const alt = values.map((v) => [...v].map((c) => c.toLowerCase() === c.toUpperCase() ? escape(c) : `[${c.toLowerCase()}${c.toUpperCase()}]`).join(''))
  const pattern = `^(?:${alt.join('|')})$`
  PATTERN_MESSAGES.set(pattern, `must be one of ${values.join(', ')}`)
  return { type: 'string', pattern, description: `One of ${values.join(', ')} (case-insensitive, stored lowercase)` }
}

function escape (c: string): string {
  return /[.*+?^${}()|[\]\\-]/.test(c) ? '\\' + c : c
}

const text = (description: string, maxLength = MAX_TEXT) => ({ type: 'string', maxLength, description }) as const
const expiry = (description: string) => ({ type: 'integer', maximum: MAX_EXPIRY_SECONDS, description }) as const

export const v1EventSchema = {
  $id: 'SignalEventV1',
  title: 'Signal event, version 1',
  description: 'A flat access-rule signal (SPEC 2.1). Exactly one of ip, asn, country is present and non-empty.',
  type: 'object',
  required: ['type', 'action'],
  additionalProperties: false,
  properties: {
    type: { const: 'access_rules', description: 'Only allowed value: access_rules' },
    action: { enum: ['block', 'unblock'], description: 'block adds or refreshes the rule; unblock removes every rule of that target' },
    ip: text('IPv4 or IPv6 address, or CIDR; normalized to its network (/32, /128 for hosts)', 64),
    asn: text('AS<digits>, case-insensitive; must exist in the ASN database', 16),
    country: text('ISO 3166-1 alpha-2 code, case-insensitive, stored uppercase', 8),
    expiration: expiry('Seconds. Block without expiry (or 0) lapses after 86400 s; positive values below 60 become 60; negative values fail'),
    description: text('Free text'),
    name: text('Name identifier for the signal', 1024),
  },
} as const

export const labelsSchema = {
  type: 'object',
  description: `At most ${MAX_LABELS} keys and ${MAX_LABELS_JSON_BYTES} bytes as JSON. labels.confidence and labels.severity set the rule's own confidence and severity`,
  maxProperties: MAX_LABELS,
  properties: {
    confidence: ciEnum(['low', 'medium', 'high']),
    severity: ciEnum(['low', 'medium', 'high', 'critical']),
  },
  additionalProperties: { type: ['string', 'number', 'boolean'] },
} as const

export const v2EnvelopeSchema = {
  $id: 'SignalEnvelopeV2',
  title: 'Signal envelope, version 2',
  description: 'A typed signal (SPEC 2.2). `rule` is an AccessRuleBody for access_rule and an ExpressionRuleBody for waf_rule and smart_firewall_rule.',
  type: 'object',
  required: ['kind', 'op'],
  additionalProperties: false,
  properties: {
    schema_version: { const: 2, description: 'Defaulted to 2 when omitted' },
    kind: { enum: ['access_rule', 'waf_rule', 'smart_firewall_rule'] },
    op: { enum: ['upsert', 'delete'] },
    rule_ref: { type: 'string', pattern: RULE_REF_PATTERN, description: 'Caller-stable identifier; required for waf_rule and smart_firewall_rule' },
    expires_in: expiry('Seconds; ignored when op is delete. Access rules: a block with 0 or none lapses after 86400 s, positive values below 60 become 60. Expression rules: 0 or none means no expiry'),
    reason: text('Free text'),
    labels: labelsSchema,
    rule: { type: 'object', description: 'Kind-specific body; required on upsert' },
  },
} as const

export const accessRuleBodySchema = {
  $id: 'AccessRuleBody',
  title: 'Access rule body',
  type: 'object',
  required: ['target'],
  additionalProperties: false,
  properties: {
    target: {
      type: 'object',
      description: 'Exactly one of ip, asn, country (an empty string counts as absent)',
      additionalProperties: false,
      properties: {
        ip: text('IP address or CIDR', 64),
        asn: text('AS<digits>', 16),
        country: text('ISO 3166-1 alpha-2 code', 8),
      },
    },
    action: { ...ciEnum(['block', 'allow']), description: 'block (default) or allow; allow rules make the never-block list' },
  },
} as const

export const expressionRuleBodySchema = {
  $id: 'ExpressionRuleBody',
  title: 'Expression rule body (waf_rule, smart_firewall_rule)',
  type: 'object',
  required: ['expression', 'action'],
  additionalProperties: false,
  properties: {
    name: text('Display name; defaults to rule_ref', 1024),
    type: ciEnum(['custom', 'generated']),
    expression: text('Filter expression over the field scheme of the kind (at most 4096 characters, as Cloudflare)', 4096),
    action: { ...ciEnum(['block', 'challenge', 'ratelimit', 'allow']), description: 'waf_rule: block, challenge, ratelimit, allow; smart_firewall_rule: block, allow (case-insensitive, stored lowercase)' },
    phase: { ...ciEnum(['request', 'response']), description: 'waf_rule only; stored as config.phase' },
    order: { type: 'integer' },
    short_description: text('Short text', 1024),
    config: { type: 'object', description: 'Free-form settings' },
  },
} as const

/** Every schema Ajv compiles, by the name the validators and the OpenAPI components use. */
export const schemas = {
  SignalEventV1: v1EventSchema,
  SignalEnvelopeV2: v2EnvelopeSchema,
  AccessRuleBody: accessRuleBodySchema,
  ExpressionRuleBody: expressionRuleBodySchema,
} as const

export type SchemaName = keyof typeof schemas
