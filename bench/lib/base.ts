/**
 * The build a change is raced against, in the same run: BENCH_BASE_TREE, another checkout with its
 * own node_modules and dist/ (`git worktree add /tmp/tf-base <commit>`, `npm ci`, `npm run build`),
 * run by BENCH_BASE_NODE (default: the Node running the bench) — e.g. the last Node 20 build
 * against this Node 24 one.
 */
export const baseTree = process.env.BENCH_BASE_TREE ?? ''
export const baseNode = process.env.BENCH_BASE_NODE ?? process.execPath
