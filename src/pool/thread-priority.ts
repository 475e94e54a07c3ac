/**
 * Scheduling priority of the threads doing background work: feed builds (the pool's workers), the
 * stream consumer and, with front-end threads, the main thread (reloads, rebuild coordination).
 * On two cores a rebuild of millions of rules fills both for seconds; at the same priority the
 * thread answering polls waits out the OS scheduler's slices behind it (bench/bigws: p99.9
 * 17 ms with the builds alone niced). At a higher nice value those threads take what the front-end
 * threads leave, and a woken front-end thread runs first.
 *
 * On Linux a nice value belongs to a thread, `setpriority(PRIO_PROCESS, 0, n)` names the calling
 * one, and a thread starts with its creator's value (test/pool/thread-priority.test.ts reads it
 * back from /proc/thread-self/stat). Elsewhere it is the process's, and this is best effort.
 *
 * Values are relative to the process's own at start (`backgroundNice`), so a server started under
 * `nice -n 5` keeps the same order. A thread is never raised: a supervisor that niced the whole
 * process further is not undone, and a thread never gets ahead of the front-end threads.
 *
 * Threads the runtime starts before any code of ours runs keep the process's value unless named:
 * V8's platform workers (concurrent marking, parallel scavenges and compiles for every isolate —
 * most of it for the main thread's heap of millions of rules), its delayed-task thread, the
 * inspector's signal thread and libuv's threadpool. `niceAllThreadsBut` nices them by thread id
 * once the threads answering polls exist (bench/NOTES.md "Who runs while a front-end thread
 * waits").
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { getPriority, setPriority } from 'node:os'

/** The lowest priority there is (the highest nice value). */
export const NICE_MAX = 19

/**
 * The nice value for background threads: `lower` steps below the calling thread's (call it from
 * the main thread before anything was niced), at most NICE_MAX; null when `lower` is 0 (off).
 *
 * @example
 *   const nice = backgroundNice(config.backgroundNice) // 10 for a server started at nice 0
 */
export function backgroundNice (lower: number): number | null {
  if (lower === 0) return null
  return Math.min(NICE_MAX, currentNice() + lower)
}

/** The calling thread's nice value (0 where it cannot be read). */
export function currentNice (): number {
  try {
    return getPriority(0)
  } catch {
    return 0
  }
}

/**
 * Gives the calling thread the nice value `nice` unless it already runs at that priority or
 * lower. Returns the thread's value afterwards. A refusal (a platform or policy that does not
 * allow it) leaves the thread as it was: the service works the same, with polls less favoured.
 */
export function niceThisThread (nice: number | null): number {
  const now = currentNice()
  if (nice === null || now >= nice) return now
  try {
    setPriority(0, nice)
  } catch {
    return now
  }
  return currentNice()
}

/**
 * The calling thread's id as the OS knows it (Linux: the tid `/proc/thread-self` names), for
 * `niceAllThreadsBut`; null where there is no such file.
 */
export function threadId (): number | null {
  try {
    const link = readlinkSync('/proc/thread-self') // "<pid>/task/<tid>"
    return Number(link.slice(link.lastIndexOf('/') + 1))
  } catch {
    return null
  }
}

/** Field 19 (nice) of a thread's /proc stat line; fields are counted after the command name, which may hold spaces. */
function niceOfThread (tid: number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[16])
}

/**
 * Gives every thread of the process but `keep` the nice value `nice`, unless it already runs at
 * that priority or lower; returns how many it lowered. Linux only (elsewhere a nice value is the
 * process's: 0). A thread that ended meanwhile, or that the OS refuses to change, is left.
 *
 * Linux's setpriority(PRIO_PROCESS, tid) names one thread (os.setPriority passes the id through),
 * so this reaches the threads no code of ours runs on. Threads started later take their
 * creator's value: those the main thread or a niced worker starts are niced already.
 *
 * @example
 *   niceAllThreadsBut(nice, frontEndThreadIds) // after the front-end threads started
 */
export function niceAllThreadsBut (nice: number | null, keep: ReadonlySet<number>): number {
  if (nice === null) return 0
  let tids: string[]
  try {
    tids = readdirSync('/proc/self/task')
  } catch {
    return 0
  }
  let lowered = 0
  for (const name of tids) {
    const tid = Number(name)
    if (keep.has(tid)) continue
    try {
      if (niceOfThread(tid) >= nice) continue
      setPriority(tid, nice)
      lowered++
    } catch {
      // Gone, or not ours to change: it keeps its value.
    }
  }
  return lowered
}
