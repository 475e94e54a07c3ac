/**
 * What the MMDB parsing layer throws when a file breaks the format. It carries only the reason;
 * the loader, which knows the path, turns it into the registry's `TF_ERR_GEO_LOAD [path, reason]`,
 * so no format code needs to thread the file name through.
 */
export class MmdbFormatError extends Error {
  constructor (reason: string) {
    super(reason)
    this.name = 'MmdbFormatError'
  }
}

/** Throws an MmdbFormatError unless `ok`; keeps the validation sites one line each. */
export function check (ok: boolean, reason: string): asserts ok {
  if (!ok) throw new MmdbFormatError(reason)
}
