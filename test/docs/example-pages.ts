/** The docs/ pages whose HTTP examples are run (test/docs/examples.ts), and the server each runs on. */
export const EXAMPLE_PAGES: readonly string[] = ['signals.md', 'errors.md', 'feeds.md', 'guards.md', 'admin-api.md', 'explain.md']

/** Settings of a page's server: feeds rebuild at once, so a page can post and then fetch. */
export function pageEnv (_page: string): Record<string, string> {
  return { THREATFEED_FEED_REBUILD_MS: '0' }
}
