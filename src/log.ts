/**
 * JSON logs to stdout (DECISIONS §6) through pino. Keys never appear in logs: the Authorization
 * header is never logged, and `redact` guards the fields where a key could be passed by mistake.
 */
import { pino, type Logger } from 'pino'

export type { Logger }

export function createLogger (level: string, destination?: NodeJS.WritableStream): Logger {
  return pino({
    level,
    base: { service: 'threatfeed' },
    redact: { paths: ['key', '*.key', 'authorization', '*.authorization', 'headers.authorization'], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  }, destination ?? process.stdout)
}
