/**
 * The admin API under /v1/admin/ (issue 22, docs/admin-api.md): one route module gathering the
 * resources of admin-workspaces.ts, admin-lists.ts and admin-views.ts behind the AdminGate.
 *
 * The CLI's admin commands keep working on the store directly (README "Admin API": when to use
 * which); both write the same records, and the server picks CLI changes up within a second.
 */
import type { RouteModule } from './app.js'
import { AdminGate, type FailureLimit } from './admin-access.js'
import { registerAdminRoutes } from './admin-io.js'
import { explainAdminRoute } from './admin-explain.js'
import type { AdminJournal } from './admin-journal.js'
import { listRoutes } from './admin-lists.js'
import { viewRoutes } from './admin-views.js'
import { workspaceRoutes } from './admin-workspaces.js'
import { ClientAddresses } from './consumer-address.js'
import type { ExplainRouteDeps } from './explain-route.js'

export interface AdminRouteDeps {
  readonly journal: AdminJournal
  /** Failed authentications per client address (default: 10 at once, then 1 a second). */
  readonly failureLimit?: FailureLimit
  /** What /v1/admin/explain needs (the feeds, lists and geo of /v1/threat/explain); absent: no such route. */
  readonly explain?: ExplainRouteDeps
}

/**
 * @example
 *   const journal = new AdminJournal({ store, log, feeds })
 *   startHttpServer(ctx, [adminRoutes({ journal })])
 */
export function adminRoutes (deps: AdminRouteDeps): RouteModule {
  return (router, ctx) => {
    const gate = new AdminGate(ctx.auth, new ClientAddresses(ctx.config.trustedProxies), deps.failureLimit)
    registerAdminRoutes(router, gate, [
      ...workspaceRoutes(ctx.store, deps.journal),
      ...listRoutes(ctx.store, deps.journal),
      ...viewRoutes(ctx.store, { staleMs: ctx.config.consumerStaleMs }),
      ...(deps.explain === undefined ? [] : [explainAdminRoute(ctx.store, deps.explain)]),
    ], ctx.log, deps.journal)
  }
}
