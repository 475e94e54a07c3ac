/**
 * Prometheus metrics (DECISIONS §6): requests by route and status, a latency histogram, process
 * figures, plus the gauges and counters other components register.
 *
 * The request counter and the latency histogram are on the hot path of every feed poll, where
 * prom-client's per-call label handling measured about 5 µs — a quarter of a 304. So they are
 * plain numbers in per-(route, status) slots, updated with two additions and a short bucket scan,
 * and written out in the Prometheus text format only when /metrics is scraped.
 */
import { performance } from 'node:perf_hooks'
import { AggregatorRegistry, Counter, Histogram, Registry, collectDefaultMetrics, Gauge, type MetricObjectWithValues, type MetricValue } from 'prom-client'
import type { ConsumerHealth } from '../stream/consumer-health.js'
import type { CertificateInfo } from './tls-material.js'
import type { ConsumerCounts, ConsumerTracker } from './consumers.js'
import type { ConsumerDrops } from '../store/types.js'

/** Upper bounds of the latency buckets, in seconds. */
const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5] as const
const BUCKET_MS = BUCKETS.map((b) => b * 1000)
/** The module's own handle: Node 20 reaches the global `performance` through a getter per use. */
const clock = performance.now.bind(performance)

class RouteLatency {
  readonly counts = new Float64Array(BUCKETS.length + 1)
  sum = 0
  n = 0
  constructor (readonly route: string) {}
}

class RequestCount {
  n = 0
  constructor (readonly route: string, readonly status: number) {}
}

/** Label values are route names and numbers we choose, but escape anyway (text format §label values). */
function label (v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')
}

/**
 * What a front-end thread counted (Metrics.export), merged into the main thread's scrape: its
 * requests and latencies, and its registry's counters (the process figures are the main
 * thread's, which reads them for the whole process).
 */
export interface ThreadMetrics {
  readonly requests: ReadonlyArray<readonly [string, number, number]>
  readonly latency: ReadonlyArray<readonly [string, readonly number[], number, number]>
  readonly registry: Array<MetricObjectWithValues<MetricValue<string>>>
}

export class Metrics {
  readonly registry = new Registry()
  readonly #requests = new Map<string, RequestCount>()
  readonly #latency = new Map<string, RouteLatency>()

  /** `processMetrics: false` on a front-end thread: the process's figures come from the main thread. */
  constructor (options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics !== false) {
      collectDefaultMetrics({ register: this.registry, prefix: 'threatfeed_' })
      // prom-client adds each nodejs_active_{handles,requests,resources} gauge twice: by type, and
      // summed as `…_total`, a name Prometheus keeps for counters (promtool check metrics fails on
      // it). The sum is `sum(threatfeed_nodejs_active_handles)`: only the gauges by type stay.
      for (const what of ['handles', 'requests', 'resources']) this.registry.removeSingleMetric(`threatfeed_nodejs_active_${what}_total`)
    }
  }

  /**
   * Counts one answered request; `startMs` is its arrival on the performance.now() scale (the
   * router's is the turn's, turn-clock.ts). The end is read here, per request.
   */
  observe (route: string, status: number, startMs: number): void {
    this.route(route)(status, startMs)
  }

  /**
   * `observe` bound to one route, for a router to take once per route: a request then costs no
   * string key and no lookup by name (the status is a small-integer key).
   */
  route (route: string): (status: number, startMs: number) => void {
    let h = this.#latency.get(route)
    if (h === undefined) {
      h = new RouteLatency(route)
      this.#latency.set(route, h)
    }
    const latency = h
    // Indexed by status (a small integer): an array element, not a Map lookup, per request.
    const counts: Array<RequestCount | undefined> = []
    return (status, startMs) => {
      let c = counts[status]
      if (c === undefined) {
        const key = route + ' ' + status
        c = this.#requests.get(key)
        if (c === undefined) {
          c = new RequestCount(route, status)
          this.#requests.set(key, c)
        }
        counts[status] = c
      }
      c.n++
      this.#record(latency, startMs)
    }
  }

  #record (h: RouteLatency, startMs: number): void {
    const ms = clock() - startMs
    let i = 0
    while (i < BUCKET_MS.length && ms > BUCKET_MS[i]!) i++
    h.counts[i]!++
    h.sum += ms / 1000
    h.n++
  }

  /** A gauge owned by another component (snapshot age, entries per feed…). */
  gauge (name: string, help: string, labelNames: string[] = []): Gauge<string> {
    return new Gauge({ name, help, labelNames, registers: [this.registry] })
  }

  counter (name: string, help: string, labelNames: string[] = []): Counter<string> {
    return new Counter({ name, help, labelNames, registers: [this.registry] })
  }

  histogram (name: string, help: string, buckets: number[], labelNames: string[] = []): Histogram<string> {
    return new Histogram({ name, help, labelNames, buckets, registers: [this.registry] })
  }

  /** This registry's counts, for the main thread's scrape (front-end threads). */
  async export (): Promise<ThreadMetrics> {
    return {
      requests: [...this.#requests.values()].map((c) => [c.route, c.status, c.n] as const),
      latency: [...this.#latency.values()].map((h) => [h.route, [...h.counts], h.sum, h.n] as const),
      registry: await this.registry.getMetricsAsJSON(),
    }
  }

  #renderRequests (threads: readonly ThreadMetrics[]): string {
    const requests = new Map<string, RequestCount>()
    const latency = new Map<string, RouteLatency>()
    for (const c of this.#requests.values()) requests.set(`${c.route} ${c.status}`, Object.assign(new RequestCount(c.route, c.status), { n: c.n }))
    for (const h of this.#latency.values()) latency.set(h.route, h)
    for (const t of threads) {
      for (const [route, status, n] of t.requests) {
        const key = `${route} ${status}`
        const c = requests.get(key) ?? new RequestCount(route, status)
        c.n += n
        requests.set(key, c)
      }
      for (const [route, counts, sum, n] of t.latency) {
        const own = latency.get(route)
        const h = new RouteLatency(route)
        if (own !== undefined) { h.counts.set(own.counts); h.sum = own.sum; h.n = own.n }
        for (let i = 0; i < counts.length; i++) h.counts[i]! += counts[i]!
        h.sum += sum
        h.n += n
        latency.set(route, h)
      }
    }
    return this.#renderRequestsOf(requests, latency)
  }

  #renderRequestsOf (requests: ReadonlyMap<string, RequestCount>, latencies: ReadonlyMap<string, RouteLatency>): string {
    const out: string[] = [
      '# HELP threatfeed_http_requests_total HTTP requests by route and status',
      '# TYPE threatfeed_http_requests_total counter',
    ]
    for (const c of requests.values()) out.push(`threatfeed_http_requests_total{route="${label(c.route)}",status="${c.status}"} ${c.n}`)
    out.push(
      '# HELP threatfeed_http_request_duration_seconds HTTP request latency by route',
      '# TYPE threatfeed_http_request_duration_seconds histogram',
    )
    for (const h of latencies.values()) {
      // Routes are bound when the router is built: a route nobody called has no series yet, so
      // the scrape grows with the routes in use, not with every route the API has.
      if (h.n === 0) continue
      const r = label(h.route)
      let cumulative = 0
      for (let i = 0; i < BUCKETS.length; i++) {
        cumulative += h.counts[i]!
        out.push(`threatfeed_http_request_duration_seconds_bucket{le="${BUCKETS[i]}",route="${r}"} ${cumulative}`)
      }
      out.push(`threatfeed_http_request_duration_seconds_bucket{le="+Inf",route="${r}"} ${h.n}`)
      out.push(`threatfeed_http_request_duration_seconds_sum{route="${r}"} ${h.sum}`)
      out.push(`threatfeed_http_request_duration_seconds_count{route="${r}"} ${h.n}`)
    }
    return out.join('\n') + '\n'
  }

  /** The scrape: this thread's figures, plus those of the front-end threads when there are. */
  async render (threads: readonly ThreadMetrics[] = []): Promise<{ contentType: string, body: string }> {
    if (threads.length === 0) return { contentType: this.registry.contentType, body: this.#renderRequestsOf(this.#requests, this.#latency) + await this.registry.metrics() }
    // Counters and histograms add up across threads; a gauge only the main thread sets stays its value.
    const merged = AggregatorRegistry.aggregate([await this.registry.getMetricsAsJSON(), ...threads.map((t) => t.registry)])
    return { contentType: this.registry.contentType, body: this.#renderRequests(threads) + await merged.metrics() }
  }
}

/**
 * The stream consumer's health (stream/consumer-health.ts), read at each scrape: how far behind
 * it is and whether its applies fail. The last error's message is in /readyz, not in a label.
 *
 * @example
 *   registerConsumerMetrics(metrics, () => consumer.health())
 */
export function registerConsumerMetrics (metrics: Metrics, health: () => ConsumerHealth): void {
  let current: ConsumerHealth | null = null
  // One read per scrape, whichever metric prom-client collects first.
  const read = (): ConsumerHealth => (current ??= health())
  const registers = [metrics.registry]
  new Gauge({ name: 'threatfeed_stream_backlog_records', help: 'Stream records accepted and not applied yet', registers, collect () { current = null; this.set(read().backlog) } })
  new Gauge({ name: 'threatfeed_stream_oldest_unapplied_seconds', help: 'Age of the oldest accepted record not applied yet (0: none)', registers, collect () { this.set(read().oldestUnappliedSeconds) } })
  new Gauge({ name: 'threatfeed_stream_apply_consecutive_failures', help: 'Stream apply passes that failed since the last one that succeeded', registers, collect () { this.set(read().consecutiveFailures) } })
  new Gauge({ name: 'threatfeed_stream_last_apply_error_timestamp_seconds', help: 'When a stream apply pass last failed (0: never)', registers, collect () { this.set((read().lastError?.at ?? 0) / 1000) } })
  new Counter({ name: 'threatfeed_stream_apply_errors_total', help: 'Stream apply passes that failed (each is retried)', registers, collect () { this.reset(); this.inc(read().applyErrors) } })
}

/**
 * Seconds until each TLS certificate in use expires (negative once it has), read at each scrape:
 * the server certificate, its chain and the client CAs, labelled by role, subject and serial so
 * an alert names the one to renew. A rotation drops the old labels at the next scrape.
 *
 * @example
 *   registerCertificateMetrics(metrics, () => listener.certificates())
 */
export function registerCertificateMetrics (metrics: Metrics, certificates: () => readonly CertificateInfo[]): void {
  const name = 'threatfeed_tls_certificate_expiry_seconds'
  // One front end per registry; a second one (a test restarting on the same Metrics) takes over.
  metrics.registry.removeSingleMetric(name)
  new Gauge({
    name,
    help: 'Seconds until the TLS certificate expires (negative: expired), by role (server, chain, client_ca), subject and serial',
    labelNames: ['role', 'subject', 'serial'],
    registers: [metrics.registry],
    collect () {
      this.reset()
      const now = Date.now()
      for (const c of certificates()) this.set({ role: c.role, subject: c.subject, serial: c.serial }, Math.round((c.notAfter - now) / 1000))
    },
  })
}

/**
 * Feed consumers by state (issue 20), as the consumer tracker last evaluated them from the store
 * (every process's polls), how many this process tracks in memory, and what its bounds let go
 * (issue 35). Plain gauges and a counter by reason: no label names a consumer or a list, so a
 * scrape stays the same size however large the fleet.
 *
 * @example
 *   registerFeedConsumerMetrics(metrics, tracker)
 */
export function registerFeedConsumerMetrics (metrics: Metrics, tracker: Pick<ConsumerTracker, 'counts' | 'dropped' | 'size'>): void {
  const registers = [metrics.registry]
  const counts = (): ConsumerCounts => tracker.counts()
  const dropped = (): Readonly<ConsumerDrops> => tracker.dropped()
  new Gauge({ name: 'threatfeed_feed_consumers_tracked', help: 'Feed consumers this process tracks in memory (bounded per key by THREATFEED_CONSUMERS_PER_KEY)', registers, collect () { this.set(tracker.size) } })
  // A counter read at each scrape: the tracker keeps the totals (a label per reason, never per consumer).
  new Counter({
    name: 'threatfeed_feed_consumers_dropped_total',
    help: 'Feed consumers the per-key and total bounds let go: evicted from memory, refused, or removed from the store',
    labelNames: ['reason'],
    registers,
    collect () {
      const d = dropped()
      this.reset()
      this.labels('evicted').inc(d.evicted)
      this.labels('refused').inc(d.refused)
      this.labels('removed').inc(d.removed)
    },
  })
  new Gauge({ name: 'threatfeed_feed_consumers_fresh', help: 'Feed consumers that polled within their stale threshold and whose polls succeed', registers, collect () { this.set(counts().fresh) } })
  new Gauge({ name: 'threatfeed_feed_consumers_stale', help: 'Feed consumers silent past their stale threshold or whose last three polls got 4xx', registers, collect () { this.set(counts().stale) } })
  new Gauge({ name: 'threatfeed_feed_consumers_behind', help: 'Feed consumers whose last version is not the current one', registers, collect () { this.set(counts().behind) } })
}

/**
 * This node's clock against the store server's (store/clock-skew.ts), in seconds (0 until first
 * measured): an alert on its absolute value names the node whose NTP is off.
 *
 * @example
 *   registerClockSkewMetric(metrics, () => watch.skewMs)
 */
export function registerClockSkewMetric (metrics: Metrics, skewMs: () => number | null): void {
  new Gauge({ name: 'threatfeed_store_clock_skew_seconds', help: 'The store server\'s clock less this node\'s (MongoDB), measured every minute', registers: [metrics.registry], collect () { this.set((skewMs() ?? 0) / 1000) } })
}
