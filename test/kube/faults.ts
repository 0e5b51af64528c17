// Request counters and injected faults. Counters are keyed "verb resource" with Kubernetes verb
// names (get list watch create update patch delete) and the plural resource ("csiaddonsnodes",
// "csiaddonsnodes/status"); non-resource requests count as "get <path>". Faults match on verb,
// resource and/or path (a string is a path prefix, a RegExp is tested against the path).

export interface Match { verb?: string; resource?: string; path?: string | RegExp }
export interface RequestFacts { verb: string; resource: string; path: string }

const matches = (m: Match | undefined, f: RequestFacts) =>
  !m ||
  ((m.verb === undefined || m.verb === f.verb) &&
    (m.resource === undefined || m.resource === f.resource) &&
    (m.path === undefined || (typeof m.path === "string" ? f.path.startsWith(m.path) : m.path.test(f.path))));

export class Counters {
  private readonly counts = new Map<string, number>();

  record(f: RequestFacts): void {
    const k = `${f.verb} ${f.resource}`;
    this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
  }

  get(verb: string, resource: string): number {
    return this.counts.get(`${verb} ${resource}`) ?? 0;
  }

  total(filter: { verb?: string; resource?: string } = {}): number {
    let n = 0;
    for (const [k, v] of this.counts) {
      const [verb, resource] = [k.slice(0, k.indexOf(" ")), k.slice(k.indexOf(" ") + 1)];
      if ((filter.verb === undefined || filter.verb === verb) && (filter.resource === undefined || filter.resource === resource)) n += v;
    }
    return n;
  }

  reset(): void {
    this.counts.clear();
  }

  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.counts.entries()].sort(([a], [b]) => a.localeCompare(b)));
  }
}

interface Failure { remaining: number; status: 500 | 503 | 429; match?: Match }
interface Latency { ms: number; match?: Match }

export class FaultPlan {
  private failures: Failure[] = [];
  private latencies: Latency[] = [];

  failNext(n: number, status: 500 | 503 | 429, match?: Match): void {
    if (n > 0) this.failures.push({ remaining: n, status, match });
  }

  latency(ms: number, match?: Match): void {
    this.latencies.push({ ms, match });
  }

  clear(): void {
    this.failures = [];
    this.latencies = [];
  }

  /** Total added latency for a request (every matching latency rule applies). */
  delayFor(f: RequestFacts): number {
    return this.latencies.filter((l) => matches(l.match, f)).reduce((sum, l) => sum + l.ms, 0);
  }

  /** The status to fail this request with, consuming one from the first matching rule. */
  takeFailure(f: RequestFacts): 500 | 503 | 429 | undefined {
    const hit = this.failures.find((x) => x.remaining > 0 && matches(x.match, f));
    if (!hit) return undefined;
    hit.remaining--;
    this.failures = this.failures.filter((x) => x.remaining > 0);
    return hit.status;
  }
}
