/**
 * Shared fixtures of the feed tests: a temporary embedded store, rules written straight through
 * the store (no ingestion), the test geo databases and a silent logger.
 */
import { fileURLToPath } from 'node:url'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openEmbeddedStore, type EmbeddedStore } from '../../src/store/embedded/embedded-store.js'
import { loadGeoIndex } from '../../src/geo/load.js'
import type { GeoIndex } from '../../src/geo/geo-index.js'
import type { AccessRule, AccessRuleInput, Target } from '../../src/store/types.js'

export const GEO_FIXTURES = fileURLToPath(new URL('../fixtures/geo/maxmind', import.meta.url))

export function testGeo (): Promise<GeoIndex> {
  return loadGeoIndex({ countryDb: `${GEO_FIXTURES}/GeoLite2-Country-Test.mmdb`, asnDb: `${GEO_FIXTURES}/GeoLite2-ASN-Test.mmdb` })
}

export interface TempStore {
  readonly dir: string
  store: EmbeddedStore
  reopen (): Promise<EmbeddedStore>
  cleanup (): Promise<void>
}

export async function tempStore (): Promise<TempStore> {
  const dir = mkdtempSync(join(tmpdir(), 'tf-feed-'))
  const t: TempStore = {
    dir,
    store: await openEmbeddedStore(dir),
    async reopen () {
      await t.store.close()
      t.store = await openEmbeddedStore(dir)
      return t.store
    },
    async cleanup () {
      await t.store.close().catch(() => {})
      rmSync(dir, { recursive: true, force: true })
    },
  }
  return t
}

let seq = 1

function target (value: string): Target {
  if (/^AS\d+$/i.test(value)) return { type: 'asn', value: value.toUpperCase() }
  if (/^[A-Z]{2}$/.test(value)) return { type: 'country', value }
  return { type: 'ip', value }
}

/** An access rule input: `value` is a canonical CIDR, `AS<n>` or a country code. */
export function rule (workspaceId: string, value: string, over: Partial<AccessRuleInput> = {}): AccessRuleInput {
  return {
    workspaceId,
    kind: 'access_rule',
    ruleRef: null,
    labels: {},
    reason: null,
    expiresAt: null,
    seq: seq++,
    target: target(value),
    action: 'block',
    name: null,
    confidence: null,
    severity: null,
    ...over,
  }
}

export async function addRules (store: EmbeddedStore, inputs: AccessRuleInput[]): Promise<AccessRule[]> {
  const out: AccessRule[] = []
  for (const i of inputs) out.push(await store.rules.upsertAccessRule(i))
  return out
}

export const silentLog = { info () {}, warn () {}, error () {}, debug () {} }
