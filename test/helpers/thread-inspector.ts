/**
 * Reaches a front-end thread of this process through the inspector (the NodeWorker domain), to
 * stop it or make it fail as a bug would: no hook in the server's code.
 */
import { Session } from 'node:inspector/promises'

export interface ThreadInspector {
  /** Runs one inspector method inside the thread and resolves with its answer. */
  call (method: string, params?: Record<string, unknown>): Promise<unknown>
  close (): void
}

/** Attaches to the first worker thread of this process whose entry file's URL matches `entry`. */
export async function inspectThread (entry: RegExp): Promise<ThreadInspector> {
  const session = new Session()
  session.connect()
  const ids: string[] = []
  session.on('NodeWorker.attachedToWorker', (m) => { if (entry.test(m.params.workerInfo.url)) ids.push(m.params.sessionId) })
  await session.post('NodeWorker.enable', { waitForDebuggerOnStart: false })
  for (let i = 0; ids.length === 0; i++) {
    if (i > 100) throw new Error(`no worker thread running ${entry} to attach to`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const sessionId = ids[0]!
  let seq = 0
  return {
    call (method, params = {}) {
      const id = ++seq
      return new Promise((resolve, reject) => {
        const on = (m: { params: { sessionId: string, message: string } }): void => {
          const msg = JSON.parse(m.params.message) as { id?: number, result?: unknown, error?: { message: string } }
          if (m.params.sessionId !== sessionId || msg.id !== id) return
          session.off('NodeWorker.receivedMessageFromWorker', on)
          if (msg.error !== undefined) reject(new Error(msg.error.message))
          else resolve(msg.result)
        }
        session.on('NodeWorker.receivedMessageFromWorker', on)
        session.post('NodeWorker.sendMessageToWorker', { sessionId, message: JSON.stringify({ id, method, params }) }).catch(reject)
      })
    },
    close () { session.disconnect() },
  }
}
