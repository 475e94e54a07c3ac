// Development entry for a front-end thread when the service runs from its TypeScript sources
// (tests, `tsx`): on Node 20 a worker thread does not inherit the loader hooks of `--import=tsx`,
// so it registers tsx itself. The compiled service loads front-thread-entry.js directly.
import { register } from 'tsx/esm/api'

register()
await import('./front-thread-entry.ts')
