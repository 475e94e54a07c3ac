/**
 * Where a thread's code is. Built, a thread runs the compiled `.js` beside the code that starts
 * it; from the TypeScript sources (tests, tsx) it runs the `.ts` itself, loaded through tsx, which
 * Node 24 applies when a thread's execArgv names it (Node 20 did not, hence the shim files that
 * registered tsx by hand before).
 */
import { fileURLToPath } from 'node:url'

export interface ThreadEntry {
  /** The module's path. */
  readonly file: string
  /** Flags the thread needs besides those it is given: tsx's loader from the sources; none built. */
  readonly loader: readonly string[]
}

/** The module `name` (a path without extension) beside `from`, an `import.meta.url`. */
export function threadEntry (from: string, name: string): ThreadEntry {
  if (!from.endsWith('.ts')) return { file: fileURLToPath(new URL(`${name}.js`, from)), loader: [] }
  // An absolute URL: `--import=tsx` would be resolved from the working directory, which need not
  // be this checkout's.
  return { file: fileURLToPath(new URL(`${name}.ts`, from)), loader: [`--import=${import.meta.resolve('tsx')}`] }
}

/** Flags that load modules first: `--import x`, `--import=x`, likewise --loader, --require. */
const LOADER_FLAG = /^(--import|--loader|--experimental-loader|--require|-r)(=|$)/

/**
 * The parent's node flags without its module loaders: a test runner's TypeScript and coverage
 * hooks loaded again in a thread made it start in 7–34 s under tap instead of 3–8 s; other flags
 * (--cpu-prof, --enable-source-maps) still apply.
 */
export function withoutLoaders (execArgv: readonly string[]): string[] {
  const out: string[] = []
  for (let i = 0; i < execArgv.length; i++) {
    const m = LOADER_FLAG.exec(execArgv[i]!)
    if (m === null) out.push(execArgv[i]!)
    else if (m[2] === '') i++ // the value is the next argument
  }
  return out
}
