// Development entry for the feed worker when the service runs from its TypeScript sources (tests,
// `tsx`): on Node 20 a worker thread does not inherit the loader hooks of `--import=tsx`, so it
// registers tsx itself, then re-exports the task functions Piscina looks up by name. The compiled
// service (dist/) loads dist/workers/feed-worker.js directly and never reads this file.
import { register } from 'tsx/esm/api'

register()
const worker = await import('./feed-worker.ts')

export const compute = worker.compute
export const render = worker.render
export const deltas = worker.deltas
