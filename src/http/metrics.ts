/**
 * Prometheus metrics (DECISIONS §6): requests by route and status, a latency histogram, process
 * figures. Label children are cached per (route, status) so the hot path does one Map lookup and
 * two increments, not prom-client's label hashing.
 */
import { Counter, Histogram, Registry, collectDefaultMetrics, Gauge } from 'prom-client'

export class Metrics {
  readonly registry = new Registry()
  readonly #requests: Counter<'route' | 'status'>
  readonly #latency: Histogram<'route'>
  readonly #children = new Map<string, { inc: () => void }>()
  readonly #latencyChildren = new Map<string, { observe: (v: number) => void }>()

  constructor () {
    collectDefaultMetrics({ register: this.registry, prefix: 'threatfeed_' })
    this.#requests = new Counter({ name: 'threatfeed_http_requests_total', help: 'HTTP requests by route and status', labelNames: ['route', 'status'], registers: [this.registry] })
    this.#latency = new Histogram({
      name: 'threatfeed_http_request_duration_seconds',
      help: 'HTTP request latency by route',
      labelNames: ['route'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [this.registry],
    })
  }

  /** Counts one answered request; `startNs` from process.hrtime.bigint() at arrival. */
  observe (route: string, status: number, startNs: bigint): void {
    const key = route + ' ' + status
    let c = this.#children.get(key)
    if (c === undefined) {
      c = this.#requests.labels(route, String(status))
      this.#children.set(key, c)
    }
    c.inc()
    let h = this.#latencyChildren.get(route)
    if (h === undefined) {
      h = this.#latency.labels(route)
      this.#latencyChildren.set(route, h)
    }
    h.observe(Number(process.hrtime.bigint() - startNs) / 1e9)
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

  async render (): Promise<{ contentType: string, body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() }
  }
}
