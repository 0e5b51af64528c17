// Request counters and injected faults. Counters are keyed "verb resource" with Kubernetes verb
// names (get list watch create update patch delete) and the plural resource ("csiaddonsnodes",
// "csiaddonsnodes/status"); non-resource requests count as "get <path>". Faults match on verb,
// resource and/or path (a string is a path prefix, a RegExp is tested against the path).
// Counts are also kept per authenticated user, so a run with several clients (a controller and
// its sidecars) can say who made which requests.

export interface Match {
  verb?: string;
  resource?: string;
  path?: string | RegExp;
}
export interface RequestFacts {
  verb: string;
  resource: string;
  path: string;
  /** A list's or watch's resourceVersion: "unset" (a quorum read from etcd for a list), "0" (the watch cache), or "set". */
  resourceVersion?: "unset" | "0" | "set";
  /** A list's or watch's one object, when its fieldSelector names it (metadata.name=X); "" for the whole collection. */
  selected?: string;
}

/** How a list or watch asked for its resourceVersion, as the counters key it. */
export function resourceVersionOption(verb: string, query: URLSearchParams): RequestFacts["resourceVersion"] {
  if (verb !== "list" && verb !== "watch") return undefined;
  const rv = query.get("resourceVersion");
  return rv === null || rv === "" ? "unset" : rv === "0" ? "0" : "set";
}

const matches = (m: Match | undefined, f: RequestFacts) =>
  !m ||
  ((m.verb === undefined || m.verb === f.verb) &&
    (m.resource === undefined || m.resource === f.resource) &&
    (m.path === undefined || (typeof m.path === "string" ? f.path.startsWith(m.path) : m.path.test(f.path))));

const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

export class Counters {
  private readonly counts = new Map<string, number>();
  private readonly users = new Map<string, Map<string, number>>();
  private readonly options = new Map<string, number>();
  private readonly selections = new Map<string, Map<string, number>>();
  private readonly sent = new Map<string, number>();
  private readonly sentTo = new Map<string, Map<string, number>>();

  record(f: RequestFacts, username?: string): void {
    const k = `${f.verb} ${f.resource}`;
    bump(this.counts, k);
    if (f.resourceVersion !== undefined) bump(this.options, `${k} resourceVersion=${f.resourceVersion}`);
    if (f.selected !== undefined) this.selections.set(k, bump(this.selections.get(k) ?? new Map<string, number>(), f.selected));
    if (username === undefined) return;
    const mine = this.users.get(username) ?? new Map<string, number>();
    this.users.set(username, bump(mine, k));
  }

  get(verb: string, resource: string): number {
    return this.counts.get(`${verb} ${resource}`) ?? 0;
  }

  /** Lists or watches of a resource by how they set resourceVersion: `withResourceVersion("list", "pods", "unset")`. */
  withResourceVersion(verb: "list" | "watch", resource: string, rv: NonNullable<RequestFacts["resourceVersion"]>): number {
    return this.options.get(`${verb} ${resource} resourceVersion=${rv}`) ?? 0;
  }

  /** Events the watches of a resource were sent (ADDED, MODIFIED, DELETED, ERROR; not bookmarks): what the server fanned out. */
  events(resource: string): number {
    return this.sent.get(resource) ?? 0;
  }

  /** The same, per watcher's username and resource: what each client had to receive and decode. */
  eventsByUser(): Record<string, Record<string, number>> {
    return Object.fromEntries([...this.sentTo.keys()].sort().map((u) => [u, sorted(this.sentTo.get(u)!)]));
  }

  recordEvent(resource: string, username?: string): void {
    bump(this.sent, resource);
    if (username !== undefined) this.sentTo.set(username, bump(this.sentTo.get(username) ?? new Map<string, number>(), resource));
  }

  /** Lists or watches of a resource by the one name they selected, "" for those of the whole collection: `byName("watch", "persistentvolumes")`. */
  byName(verb: "list" | "watch", resource: string): Record<string, number> {
    return sorted(this.selections.get(`${verb} ${resource}`) ?? new Map<string, number>());
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
    this.users.clear();
    this.options.clear();
    this.selections.clear();
    this.sent.clear();
    this.sentTo.clear();
  }

  snapshot(): Record<string, number> {
    return sorted(this.counts);
  }

  /** The same counts, per authenticated username. */
  byUser(): Record<string, Record<string, number>> {
    return Object.fromEntries([...this.users.keys()].sort().map((u) => [u, sorted(this.users.get(u)!)]));
  }
}

const sorted = (m: Map<string, number>) => Object.fromEntries([...m.entries()].sort(([a], [b]) => a.localeCompare(b)));

interface Failure {
  remaining: number;
  status: 500 | 503 | 429;
  match?: Match;
}
interface Latency {
  ms: number;
  match?: Match;
}

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
