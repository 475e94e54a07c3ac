/**
 * The OpenAPI 3.1 document served at GET /openapi.json: both signal endpoints, built from the
 * very schemas Ajv compiles (schemas.ts), and the feed endpoints of SPEC 4.3/4.4/7.2.
 * OpenAPI 3.1 schemas are JSON Schema 2020-12, so the Ajv schemas are embedded unchanged (less
 * their `$id`, which would re-base references inside the document).
 */
import { adminOpenApiPaths, adminOpenApiSchemas } from '../json/admin-openapi.js'
import { FAMILIES, FEED_ACTIONS, FORMATS } from '../store/types.js'
import { MAX_BATCH_ENTRIES, schemas } from './schemas.js'

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const json = (schema: unknown) => ({ 'application/json': { schema } })

function withoutId (schema: Record<string, unknown>): Record<string, unknown> {
  const { $id: _id, ...rest } = schema
  return rest
}

/**
 * The expression rule body as the route takes it: `type` is required. The schema Ajv compiles
 * leaves it out because the batch is checked for it first, whole (a missing or empty type rejects
 * every entry: TF_ERR_RULE_TYPE_REQUIRED), but a client reading the document must see it required.
 */
function expressionRuleBody (): Record<string, unknown> {
  const s = withoutId(schemas.ExpressionRuleBody)
  const properties = s.properties as Record<string, Record<string, unknown>>
  return {
    ...s,
    required: ['type', ...(s.required as string[])],
    properties: { ...properties, type: { ...properties.type, description: `${String(properties.type!.description)}. Required: a missing or empty type on an upserted rule rejects the whole batch (400)` } },
  }
}

const batchResponse = {
  type: 'object',
  required: ['success', 'message'],
  properties: {
    success: { type: 'boolean', description: 'true when every entry was processed' },
    message: { type: 'string', description: 'Processed <n> entries, <m> failed' },
    errors: { type: 'array', items: { type: 'string' }, description: 'One `Entry <index>: <reason>` per failed entry (0-based). Present on 206; v2 always includes it' },
    batch: {
      type: 'object',
      required: ['id', 'first_seq', 'last_seq'],
      description: 'The receipt of an acknowledged batch: its id, stored with it, and the stream positions its accepted entries took (entry order, consecutive)',
      properties: {
        id: { type: 'string', format: 'uuid' },
        first_seq: { type: 'integer', minimum: 1 },
        last_seq: { type: 'integer', minimum: 1 },
      },
    },
  },
}

const errorBody = {
  type: 'object',
  required: ['error', 'message', 'code'],
  properties: {
    error: { type: 'string', description: 'Error class name, e.g. ValidationError, UnauthorizedError' },
    message: { type: 'string' },
    details: {
      type: 'array',
      description: 'On validation errors: one item per failure; `field` is `[<index>].<path>`',
      items: { type: 'object', required: ['field', 'message'], properties: { field: { type: 'string' }, message: { type: 'string' }, value: {} } },
    },
    code: { type: 'integer', description: 'The HTTP status' },
  },
}

const feedErrorBody = {
  type: 'object',
  required: ['success', 'error', 'details'],
  properties: {
    success: { const: false },
    error: { type: 'string' },
    details: { type: 'object', description: '400: `supported` values; 413: `entries`, `limit`, `hint`; otherwise empty' },
  },
}

/** v2 entries with the rule body chosen by kind. */
const typedEnvelope = {
  allOf: [
    ref('SignalEnvelopeV2'),
    {
      if: { properties: { kind: { const: 'access_rule' } } },
      then: { properties: { rule: ref('AccessRuleBody') } },
      else: { properties: { rule: ref('ExpressionRuleBody') } },
    },
  ],
}

const err = (description: string, headers?: Record<string, unknown>) => ({ description, content: json(ref('ErrorBody')), ...(headers === undefined ? {} : { headers }) })
const retryAfter = { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } }
const allowHeader = (methods: string) => ({ Allow: { description: `The methods of this path: ${methods}`, schema: { type: 'string', const: methods } } })
/**
 * The challenges of a 401 (RFC 9110 §11.6.1, DECISIONS §2), documented here and sent by
 * src/http/respond.ts: Bearer everywhere (RFC 6750 §3), and on feeds Basic too, whose realm is
 * required and whose charset says the user-pass is UTF-8 (RFC 7617 §2, §2.1).
 */
export const AUTH_CHALLENGES = {
  signal: 'Bearer realm="threatfeed"',
  feed: 'Bearer realm="threatfeed", Basic realm="threatfeed", charset="UTF-8"',
} as const
const challenge = (value: string) => ({ 'WWW-Authenticate': { description: 'The authentication schemes accepted here', schema: { type: 'string', const: value } } })

function signalPath (version: 1 | 2) {
  const entry = version === 1 ? ref('SignalEventV1') : typedEnvelope
  const responses: Record<string, unknown> = {
    200: { description: 'Every entry processed', content: json(ref('BatchResponse')) },
    206: { description: 'Some entries failed; read `errors`, do not retry the whole batch', content: json(ref('BatchResponse')) },
    400: err(version === 1
      ? 'Invalid JSON, data, batch size, Content-Type or UTF-8; every entry failed (ValidationError with details)'
      : 'As v1, and a missing or empty rule.type on an expression rule (whole batch rejected)'),
    401: err(version === 1 ? 'Invalid or missing API key' : 'Invalid or missing API key, missing scope or inactive subscription (v2 answers 401 for all)', challenge(AUTH_CHALLENGES.signal)),
  }
  if (version === 1) {
    responses[402] = err('Subscription required')
    responses[403] = err('Key lacks the signals:write scope')
  }
  responses[405] = err('Method not allowed', allowHeader('POST'))
  responses[429] = err('Too many requests for this key', retryAfter)
  responses[500] = err('Store unavailable or server error; retry with backoff')
  return {
    post: {
      operationId: `postSignalV${version}`,
      summary: version === 1 ? 'Submit a batch of v1 signal events' : 'Submit a batch of v2 signal envelopes',
      security: [{ bearer: [] }],
      requestBody: {
        required: true,
        content: json({ type: 'array', minItems: 1, maxItems: MAX_BATCH_ENTRIES, items: entry }),
      },
      responses,
    },
  }
}

const feedParameters = [
  { name: 'format', in: 'query', schema: { enum: [...FORMATS, 'ipset', 'json', 'txt', 'alias_c', 'alias_d'], default: 'plain' }, description: 'Output dialect; txt, alias_c and alias_d mean plain; ipset (`ipset restore` input) and json are the plain networks in another syntax (docs/deltas.md)' },
  { name: 'family', in: 'query', schema: { enum: [...FAMILIES], default: 'both' } },
  { name: 'action', in: 'query', schema: { enum: [...FEED_ACTIONS], default: 'block' }, description: 'block: the deny list; allow: the never-block list' },
  { name: 'checksum', in: 'query', schema: { enum: ['md5'] }, description: 'Return the MD5 of the feed body instead of the feed' },
  { name: 'since', in: 'query', schema: { type: 'string' }, description: 'An ETag of this variant: answer what changed since that version (a delta), or the full feed with X-Feed-Delta: full (docs/deltas.md)' },
  { name: 'table', in: 'query', schema: { type: 'string', default: 'threatfeed' }, description: 'The nftables table (family inet) a delta script names' },
  { name: 'set', in: 'query', schema: { type: 'string' }, description: 'The nftables set (default blocklist_v4 / blocklist_v6) or ipset set (default threatfeed) a body names' },
  { name: 'If-None-Match', in: 'header', schema: { type: 'string' } },
  { name: 'If-Modified-Since', in: 'header', schema: { type: 'string' } },
  { name: 'Accept-Encoding', in: 'header', schema: { type: 'string' }, description: 'gzip for a gzip-encoded body' },
]

const header = (description: string, type = 'string') => ({ description, schema: { type } })
const feedHeaders = {
  ETag: header('Strong validator; differs per format, family, action and encoding'),
  'Last-Modified': header('When the current feed content first appeared'),
  'Cache-Control': header('private, max-age=30, must-revalidate'),
  Vary: header('Accept-Encoding, Authorization'),
  'X-Feed-Entry-Count': header('Networks in the feed', 'integer'),
  'X-Feed-Entry-Limit': header("The feed's entry cap", 'integer'),
}
const feedErr = (description: string, headers?: Record<string, unknown>) => ({ description, content: json(ref('FeedErrorBody')), ...(headers === undefined ? {} : { headers }) })

function feedOperation (list: boolean, method: 'get' | 'head') {
  const responses: Record<string, unknown> = {
    200: {
      description: 'The feed (GET) or its headers (HEAD)',
      headers: feedHeaders,
      content: method === 'head' ? undefined : { 'text/plain': { schema: { type: 'string' } }, 'text/csv': { schema: { type: 'string' } } },
    },
    304: {
      description: 'Unchanged since the validator sent; empty body',
      headers: { ETag: feedHeaders.ETag, 'Last-Modified': feedHeaders['Last-Modified'], 'Cache-Control': feedHeaders['Cache-Control'], Vary: feedHeaders.Vary },
    },
    400: feedErr('Unsupported format, family, action or checksum, or a repeated parameter; details.supported lists the values'),
    401: feedErr('Invalid or missing API key', challenge(AUTH_CHALLENGES.feed)),
    402: feedErr('Subscription required'),
    403: feedErr('Key lacks the feeds:read scope'),
  }
  if (list) {
    responses[404] = feedErr('No such access-rules list')
    responses[409] = feedErr('The name matches more than one list; address it by UUID')
  }
  responses[405] = feedErr('Method not allowed', allowHeader('GET, HEAD'))
  responses[413] = { ...feedErr('The feed exceeds its entry limit; nothing is returned'), headers: { 'X-Feed-Entry-Count': feedHeaders['X-Feed-Entry-Count'], 'X-Feed-Entry-Limit': feedHeaders['X-Feed-Entry-Limit'] } }
  responses[500] = feedErr('Internal server error')
  const parameters = list
    ? [{ name: 'list', in: 'path', required: true, schema: { type: 'string' }, description: "The list's UUID or name; stored list defaults fill absent parameters" }, ...feedParameters]
    : feedParameters
  return {
    operationId: `${method}${list ? 'ListFeed' : 'WorkspaceFeed'}`,
    summary: list ? "One list's access rules as a network feed" : "The workspace's access rules as a network feed",
    security: [{ bearer: [] }, { basic: [] }],
    parameters,
    responses,
  }
}

const nullable = (type: string) => ({ type: [type, 'null'] })
const strings = { type: 'object', additionalProperties: { type: 'string' } }
const explainedRule = {
  type: 'object',
  required: ['id', 'kind', 'target', 'rule_ref', 'action', 'labels', 'confidence', 'severity', 'created_at', 'updated_at', 'expires_at', 'stream_seq'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    kind: { const: 'access_rule' },
    target: { type: 'object', required: ['type', 'value'], properties: { type: { enum: ['ip', 'asn', 'country'] }, value: { type: 'string' } } },
    rule_ref: nullable('string'),
    action: { enum: ['block', 'allow'] },
    name: nullable('string'),
    reason: nullable('string'),
    labels: { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] } },
    confidence: { description: "The rule's own (field or label); null: the list's default applies", ...nullable('string') },
    severity: nullable('string'),
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
    expires_at: { type: ['string', 'null'], format: 'date-time' },
    stream_seq: { type: 'integer', description: 'Stream position of the signal that last changed the rule' },
    expansion: { description: "Country or ASN rule: the code and the database record's network and file", ...strings },
  },
}
const explanation = {
  type: 'object',
  required: ['ip', 'family', 'workspace', 'at', 'geo', 'feeds'],
  properties: {
    ip: { type: 'string' },
    family: { enum: ['v4', 'v6'] },
    workspace: { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' } } },
    at: { type: 'string', format: 'date-time' },
    geo: { type: 'object', properties: { country: { type: ['object', 'null'] }, asn: { type: ['object', 'null'] } } },
    feeds: {
      type: 'array',
      items: {
        type: 'object',
        required: ['feed', 'list', 'name', 'built_at', 'actions'],
        properties: {
          feed: { type: 'string', description: "'*' for the workspace feed, else the list id" },
          list: { type: ['object', 'null'] },
          name: { type: 'string' },
          built_at: { ...nullable('string'), format: 'date-time', description: 'null: not built, nobody polled the feed lately (reason not_built)' },
          held: {
            type: 'object',
            description: 'Set when a publish guard holds the feed back',
            required: ['reason', 'since', 'guards', 'digest'],
            properties: {
              reason: { type: 'string' },
              since: { type: 'string', format: 'date-time' },
              guards: { type: 'object', description: 'The guard tripped per held action, by its admin API field (max_shrink_pct)', additionalProperties: { type: 'string' } },
              digest: { type: 'string', description: 'The held build: what list accept takes' },
            },
          },
          actions: { type: 'object', properties: Object.fromEntries(FEED_ACTIONS.map((a) => [a, ref('ExplainedAction')])) },
        },
      },
    },
  },
}
const explainedAction = {
  type: 'object',
  required: ['published', 'default', 'formats', 'rules', 'reasons'],
  properties: {
    published: { type: 'boolean', description: 'In the body the feed answers for this action with its default format and family' },
    default: { type: 'object', properties: { format: { enum: [...FORMATS] }, family: { enum: [...FAMILIES] } } },
    formats: {
      type: 'array',
      items: {
        type: 'object',
        required: ['format', 'family', 'status', 'entries', 'limit', 'published'],
        properties: {
          format: { enum: [...FORMATS] },
          family: { enum: [...FAMILIES] },
          status: { enum: [200, 413] },
          entries: { type: 'integer' },
          limit: { type: 'integer' },
          published: { type: 'boolean' },
          network: { description: 'plain, dialect_a, nftables: the network holding the address', ...nullable('string') },
          rows: { type: 'array', description: 'dialect_b: the rows holding it, one per group', items: { type: 'object', properties: { row: { type: 'string' }, network: { type: 'string' }, confidence: { type: 'string' }, severity: { type: 'string' } } } },
        },
      },
    },
    rules: { type: 'array', items: ref('ExplainedRule') },
    reasons: {
      type: 'array',
      items: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: { enum: ['no_rule', 'lapsed', 'carved', 'not_selected', 'family_not_published', 'over_cap', 'changed_since_build', 'not_built', 'held'] },
          message: { type: 'string' },
          guard: { type: 'string', description: 'held: the guard holding the new build back' },
        },
      },
    },
  },
}

function explainOperation (method: 'get' | 'head') {
  return {
    operationId: `${method}Explain`,
    summary: 'Why an address is, or is not, in the workspace feed and each list',
    security: [{ bearer: [] }, { basic: [] }],
    parameters: [
      { name: 'ip', in: 'query', required: true, schema: { type: 'string' }, description: 'One IPv4 or IPv6 address (not a network)' },
      { name: 'list', in: 'query', schema: { type: 'string' }, description: 'Only this list (UUID or name); default: the workspace feed and every list' },
    ],
    responses: {
      200: { description: 'The explanation (GET) or its headers (HEAD)', ...(method === 'head' ? {} : { content: json(ref('Explanation')) }) },
      400: feedErr('Missing, repeated or malformed ip (a network, a zone id, not an address), or a repeated list'),
      401: feedErr('Invalid or missing API key', challenge(AUTH_CHALLENGES.feed)),
      402: feedErr('Subscription required'),
      403: feedErr('Key lacks the rules:read scope (feeds:read is not enough)'),
      404: feedErr('No such access-rules list'),
      405: feedErr('Method not allowed', allowHeader('GET, HEAD')),
      409: feedErr('The name matches more than one list; address it by UUID'),
      500: feedErr('Internal server error'),
    },
  }
}

/**
 * @example
 *   const doc = buildOpenApiDocument()
 *   doc.paths['/v1/signal'].post.requestBody // array of SignalEventV1, 1..1000
 */
export function buildOpenApiDocument (version = '0.1.0') {
  return {
    openapi: '3.1.0',
    info: {
      title: 'threatfeed',
      version,
      description: 'Signal ingestion (v1, v2) and threat feeds',
      license: { name: 'Apache License 2.0', identifier: 'Apache-2.0' },
    },
    servers: [{
      url: '{scheme}://{host}:{port}',
      description: 'A threatfeed server; `npm start` listens on port 8080 (PORT)',
      variables: {
        scheme: { enum: ['http', 'https'], default: 'http', description: 'https: the server\'s own TLS listener (THREATFEED_TLS_CERT and THREATFEED_TLS_KEY; THREATFEED_TLS_PORT, default 8443), or a proxy in front that terminates TLS' },
        host: { default: 'localhost' },
        port: { default: '8080' },
      },
    }],
    paths: {
      '/v1/signal': signalPath(1),
      '/v2/signal': signalPath(2),
      '/v1/threat/feeds': { get: feedOperation(false, 'get'), head: feedOperation(false, 'head') },
      '/v1/threat/feeds/{list}': { get: feedOperation(true, 'get'), head: feedOperation(true, 'head') },
      '/v1/threat/explain': { get: explainOperation('get'), head: explainOperation('head') },
      ...adminOpenApiPaths,
    },
    components: {
      schemas: {
        ...Object.fromEntries(Object.entries(schemas).map(([name, s]) => [name, withoutId(s)])),
        ExpressionRuleBody: expressionRuleBody(),
        BatchResponse: batchResponse,
        ErrorBody: errorBody,
        FeedErrorBody: feedErrorBody,
        Explanation: explanation,
        ExplainedAction: explainedAction,
        ExplainedRule: explainedRule,
        ...adminOpenApiSchemas,
      },
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API_KEY>' },
        basic: { type: 'http', scheme: 'basic', description: 'Feeds only: username `api`, password the API key' },
      },
    },
  }
}
