/** Spawns a fixture under tsx and reads its stdout as complete lines. */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export function fixturePath (name: string): string {
  return fileURLToPath(new URL(`../fixtures/store/${name}`, import.meta.url))
}

export class Child {
  readonly process: ChildProcess
  /** Complete lines only: a line cut by SIGKILL was never fully acknowledged. */
  readonly lines: string[] = []
  stderr = ''
  readonly exited: Promise<number | null>
  #partial = ''
  #onLine: Array<() => void> = []

  constructor (fixture: string, args: string[]) {
    this.process = spawn(process.execPath, ['--import=tsx', fixturePath(fixture), ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    this.process.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      const parts = (this.#partial + chunk).split('\n')
      this.#partial = parts.pop() ?? ''
      this.lines.push(...parts)
      for (const notify of this.#onLine.splice(0)) notify()
    })
    this.process.stderr?.setEncoding('utf8').on('data', (chunk: string) => { this.stderr += chunk })
    this.exited = new Promise((resolve) => this.process.once('exit', (code) => {
      for (const notify of this.#onLine.splice(0)) notify()
      resolve(code)
    }))
  }

  /** Resolves with the first line matching `pred` (already read or still to come). */
  waitForLine (pred: (line: string) => boolean, timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching line within ${timeoutMs} ms; stderr: ${this.stderr}`)), timeoutMs)
      const check = (): void => {
        const found = this.lines.find(pred)
        if (found !== undefined) {
          clearTimeout(timer)
          resolve(found)
        } else if (this.process.exitCode !== null || this.process.signalCode !== null) {
          clearTimeout(timer)
          reject(new Error(`child exited (${this.process.exitCode ?? this.process.signalCode}); stderr: ${this.stderr}`))
        } else {
          this.#onLine.push(check)
        }
      }
      check()
    })
  }

  async kill (signal: NodeJS.Signals): Promise<void> {
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill(signal)
    await this.exited
  }
}
