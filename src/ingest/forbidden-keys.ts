/**
 * Keys no entry may carry anywhere (DECISIONS §3): `__proto__`, `constructor` and `prototype`
 * (prototype pollution once an object is copied or merged) and keys starting with `$` (MongoDB
 * operators: nothing from a body may ever reach a query as an operator). Also bounds nesting, so
 * that free-form objects (`labels`, `rule.config`) cannot make any later recursive walk — ours,
 * the store's serializer, a log line — overflow the stack.
 *
 * Runs on every entry before schema validation, so the failure names the key, not a vaguer
 * "is not an allowed field".
 */
import type { EntryFailure } from './validators.js'

/** Deepest nesting an entry may have (the entry object itself is level 1). */
export const MAX_DEPTH = 32

const RESERVED = new Set(['__proto__', 'constructor', 'prototype'])

/**
 * The first forbidden key or over-deep value of an entry, or null.
 *
 * @example
 *   findForbiddenKey(JSON.parse('{"labels":{"$gt":1}}'))
 *   // { path: 'labels.$gt', message: 'key is not allowed (reserved name or starting with $)', value: '$gt' }
 */
export function findForbiddenKey (entry: unknown): EntryFailure | null {
  const found = walk(entry, 1)
  if (found === null) return null
  // The path is assembled only for the failure, innermost segment first: on the success path (almost
  // every entry) no string is built at all.
  let path = ''
  for (let i = found.segments.length - 1; i >= 0; i--) {
    const s = found.segments[i]!
    path = typeof s === 'number' ? `${path}[${s}]` : path === '' ? s : `${path}.${s}`
  }
  return { path, message: found.message, value: found.value }
}

interface Found { segments: Array<string | number>, message: string, value: unknown }

function walk (value: unknown, depth: number): Found | null {
  if (typeof value !== 'object' || value === null) return null
  if (depth > MAX_DEPTH) return { segments: [], message: `is nested deeper than ${MAX_DEPTH} levels`, value: null }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const f = walk(value[i], depth + 1)
      if (f !== null) { f.segments.push(i); return f }
    }
    return null
  }
  // Object.keys sees an own "__proto__" created by JSON.parse, and never walks the prototype chain.
  for (const key of Object.keys(value)) {
    if (RESERVED.has(key) || key.charCodeAt(0) === 0x24 /* $ */) {
      return { segments: [key], message: 'key is not allowed (reserved name or starting with $)', value: key }
    }
    const f = walk((value as Record<string, unknown>)[key], depth + 1)
    if (f !== null) { f.segments.push(key); return f }
  }
  return null
}

/**
 * Whether `value` nests at most MAX_DEPTH levels, checked without recursion (a parsed body can
 * nest 100 000 levels deep: V8's JSON.parse is iterative, JSON.stringify is not).
 */
export function isShallow (value: unknown): boolean {
  let level: unknown[] = [value]
  for (let depth = 1; level.length > 0; depth++) {
    const next: unknown[] = []
    for (const v of level) {
      if (typeof v !== 'object' || v === null) continue
      if (depth > MAX_DEPTH) return false
      for (const child of Array.isArray(v) ? v : Object.values(v)) {
        if (typeof child === 'object' && child !== null) next.push(child)
      }
    }
    level = next
  }
  return true
}
