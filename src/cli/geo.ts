/** `threatfeed geo lookup|expand|build-asn`: look into the geo databases and build the ASN one. */
import { CliError, parseOptions, requireOption, writeHelp, writeJson, type CliIo, type Command } from './command.js'
import { writeAsnMmdb } from '../geo/build-asn.js'
import { resolveAsnDb, resolveCountryDb, type DefaultGeoOptions } from '../geo/default-db.js'
import { loadGeoIndex } from '../geo/load.js'
import { GeoLookup, type GeoLookupHit } from '../geo/lookup.js'
import { packCountryCode, parseAsnText } from '../geo/record-keys.js'
import type { FamilyFilter, NetworkSet } from '../net/network-set.js'

const help = `Usage: threatfeed geo <lookup|expand|build-asn> [options]

  lookup IP [--json]
      The country and ASN records of an address, from the configured databases.
  expand (--country CC | --asn ASN) [--family v4|v6|both] [--json]
      The coalesced networks a country or ASN rule publishes, one CIDR per line
      (IPv4 first; IPv4 space inside IPv6 is never listed as IPv6).
  build-asn --csv FILE [--csv FILE ...] --out FILE [--json]
      Builds a GeoLite2-ASN-schema MaxMind DB from ip-location-db ASN CSV files
      (first,last,asn,"organization"; IPv4 and IPv6 rows).

Databases: THREATFEED_GEO_COUNTRY_DB and THREATFEED_GEO_ASN_DB (MMDB paths), or else the
embedded default: DB-IP Lite country (CC BY 4.0) and an ASN database built once from
@ip-location-db/asn into THREATFEED_DATA_DIR/geo (default ./data/geo).`

const options = {
  country: { type: 'string' },
  asn: { type: 'string' },
  family: { type: 'string' },
  csv: { type: 'string', multiple: true },
  out: { type: 'string' },
} as const

const FAMILIES: readonly FamilyFilter[] = ['v4', 'v6', 'both']

export const geoCommand: Command = {
  name: 'geo',
  help,
  async run (args: string[], io: CliIo): Promise<number> {
    const [verb, ...rest] = args
    if (verb === undefined || verb === '--help' || verb === '-h') return writeHelp(io, help)
    const { values, positionals } = parseOptions(rest, options, verb === 'lookup')
    if (values.help === true) return writeHelp(io, help)
    const json = values.json === true
    switch (verb) {
      case 'lookup': {
        if (positionals.length !== 1) throw new CliError('geo lookup takes exactly one IP address')
        const ip = positionals[0]!
        const geo = GeoLookup.open({ countryDb: resolveCountryDb(io.env), asnDb: await resolveAsnDb(io.env, buildOptions(io)) })
        const r = geo.lookup(ip)
        if (json) {
          writeJson(io, r)
        } else {
          io.stdout.write(`${r.ip}\n`)
          io.stdout.write(`  country  ${r.country === null ? '(not found)' : `${r.country.code ?? '(no code)'}  ${where(r.country)}`}\n`)
          const asn = r.asn === null ? '(not found)' : `${r.asn.asn === null ? '(no number)' : `AS${r.asn.asn}`}${r.asn.organization === null ? '' : ` ${r.asn.organization}`}  ${where(r.asn)}`
          io.stdout.write(`  asn      ${asn}\n`)
        }
        return 0
      }
      case 'expand': {
        const family = familyOf(values.family)
        if ((values.country === undefined) === (values.asn === undefined)) throw new CliError('geo expand takes exactly one of --country CC or --asn ASN')
        let label: string
        let known: boolean
        let set: NetworkSet
        if (values.country !== undefined) {
          const cc = values.country.toUpperCase()
          if (packCountryCode(cc) < 0) throw new CliError(`--country must be a two-letter code, got ${JSON.stringify(values.country)}`)
          const index = await loadGeoIndex({ countryDb: resolveCountryDb(io.env) })
          label = cc
          known = index.hasCountry(cc)
          set = index.expandToSet({ countries: [cc] })
        } else {
          const asn = parseAsnText(values.asn!)
          if (asn < 0) throw new CliError(`--asn must be AS<digits> or <digits> in 1..4294967295, got ${JSON.stringify(values.asn)}`)
          const index = await loadGeoIndex({ asnDb: await resolveAsnDb(io.env, buildOptions(io)) })
          label = `AS${asn}`
          known = index.hasAsn(asn)
          set = index.expandToSet({ asns: [asn] })
        }
        if (!known) io.stderr.write(`threatfeed: note: ${label} is not in the ${values.country !== undefined ? 'country' : 'ASN'} database; a rule for it publishes nothing\n`)
        const lines = set.toLines(family)
        if (json) {
          const networks = lines === '' ? [] : lines.slice(0, -1).split('\n')
          writeJson(io, { ...(values.country !== undefined ? { country: label } : { asn: label }), family, known, count: networks.length, networks })
        } else {
          io.stdout.write(lines)
        }
        return 0
      }
      case 'build-asn': {
        const csv = values.csv ?? []
        if (csv.length === 0) throw new CliError('--csv is required (repeat it for several files)')
        const out = requireOption(values, 'out')
        const t0 = performance.now()
        const stats = writeAsnMmdb(csv, out, io.isTTY ? { progress: io.stderr } : {})
        const ms = Math.round(performance.now() - t0)
        if (json) writeJson(io, { out, ...stats, ms })
        else io.stdout.write(`wrote ${out}: ${stats.rows} rows, ${stats.networks} networks, ${stats.records} records, ${stats.bytes} bytes in ${(ms / 1000).toFixed(1)} s${stats.skipped > 0 ? ` (${stats.skipped} rows skipped)` : ''}\n`)
        return 0
      }
      default:
        throw new CliError(`unknown geo command ${JSON.stringify(verb)}; see threatfeed geo --help`)
    }
  },
}

function familyOf (v: string | undefined): FamilyFilter {
  if (v === undefined) return 'both'
  if (!(FAMILIES as readonly string[]).includes(v)) throw new CliError(`--family must be one of ${FAMILIES.join(', ')}, got ${JSON.stringify(v)}`)
  return v as FamilyFilter
}

function where (hit: GeoLookupHit): string {
  return `${hit.network}  (${hit.database})`
}

/** Building the default ASN database: a progress bar on a terminal, and a note when it is done. */
function buildOptions (io: CliIo): DefaultGeoOptions {
  return {
    progress: io.isTTY,
    stream: io.stderr,
    onBuilt: (s) => io.stderr.write(`threatfeed: built the default ASN database ${s.path} (${s.records} records, ${s.networks} networks) in ${(s.ms / 1000).toFixed(1)} s\n`),
  }
}
