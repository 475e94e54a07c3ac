/**
 * GET /v1/admin/explain?ip=ADDR[&list=NAME|UUID][&workspace=ID]: explain (issue 20, README
 * "Explain") for the workspace an admin key names — any workspace for `admin:all`, its own for
 * `admin` (another is the 404 of an unknown one, as everywhere in the admin API). The answer is
 * /v1/threat/explain's, computed by the same function (explain-route.ts explainIn); only who may
 * ask, and for which workspace, differ.
 */
import { ThreatfeedError } from '../errors.js'
import type { Store } from '../store/types.js'
import { workspaceFor } from './admin-access.js'
import { invalid, readQuery, sendAdmin, type AdminRoute } from './admin-io.js'
import { explainIn, parseExplainQuery, type ExplainRouteDeps } from './explain-route.js'

export const ADMIN_EXPLAIN_PATH = '/v1/admin/explain'

export function explainAdminRoute (store: Store, deps: ExplainRouteDeps): AdminRoute {
  return {
    method: 'get', pattern: ADMIN_EXPLAIN_PATH, route: 'admin_explain',
    async handle (call) {
      const q = readQuery(call.query, ['workspace', 'ip', 'list'])
      const w = await workspaceFor(store, call.caller, q.get('workspace') ?? undefined)
      let explanation
      try {
        explanation = await explainIn(store, deps, w, parseExplainQuery(call.query))
      } catch (e) {
        throw asValidation(e)
      }
      sendAdmin(call.ex, 200, explanation)
    },
  }
}

/** Explain's bad `ip` (a usage error naming the parameter) as the admin API's 400 with `details`. */
function asValidation (e: unknown): unknown {
  if (!(e instanceof ThreatfeedError) || e.code !== 'TF_ERR_INVALID_ARGUMENT') return e
  const d = e.details as { parameter?: unknown, value?: unknown } | undefined
  if (typeof d?.parameter !== 'string') return e
  return invalid([{ field: d.parameter, message: e.message, value: d.value ?? null }])
}
