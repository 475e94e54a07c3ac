/**
 * The dialect_a comment header (SPEC 4.5, DECISIONS §5): six lines, then the `plain` lines.
 * `generated` is the feed's Last-Modified, not the build time, so the body (and its ETag) change
 * only when the content does. List names and descriptions hold no control characters (the CLI
 * refuses them), so a header line cannot be split; a stray one is replaced here all the same.
 */
import type { WireAction, WireFamily } from '../../pool/protocol.js'

// eslint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g

/**
 * ISO 8601 UTC to the second, as Last-Modified has it.
 *
 * @example
 *   formatGenerated(Date.UTC(2025, 0, 2, 3, 4, 5, 678)) // '2025-01-02T03:04:05Z'
 */
export function formatGenerated (ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19) + 'Z'
}

/**
 * @example
 *   renderDialectAHeader({ name: 'edge', description: 'All access rules', action: 'block', family: 'v4', generated: 0, entries: 2 })
 *   // '# edge\n# All access rules\n# action: block\n# family: v4\n# generated: 1970-01-01T00:00:00Z\n# entries: 2\n'
 */
export function renderDialectAHeader (h: { name: string, description: string, action: WireAction, family: WireFamily, generated: number, entries: number, shard?: { index: number, of: number } | null }): Uint8Array {
  // An empty description is a bare `#`: no trailing space on the line.
  const description = h.description.replace(CONTROL, ' ')
  let text = `# ${h.name.replace(CONTROL, ' ')}\n#${description === '' ? '' : ' ' + description}\n# action: ${h.action}\n# family: ${h.family}\n# generated: ${formatGenerated(h.generated)}\n# entries: ${h.entries}\n`
  // An extension (issue 21): one line after SPEC 4.5's six, on sharded bodies only.
  if (h.shard !== undefined && h.shard !== null) text += `# shard: ${h.shard.index}/${h.shard.of}\n`
  return Buffer.from(text, 'utf8')
}
