// The in-memory Kubernetes API in a process of its own, so that serving the sidecar's reads does
// not share an event loop with the bench's load generator (which would slow the measured path).
// The parent talks to it over the IPC channel of fork(): it learns the kubeconfigs, and reads and
// resets the request counters, and lists objects (without counting: the bench's looks cost nothing). Run by kube.ts; argv: <ChildSpec as JSON>.
import { randomBytes } from "node:crypto";
import { startKubeApi } from "../kube/index.js";
import { seedObjects } from "./volumes.js";
import { fleetNode, fleetPod, fleetPv, fleetSeed, type Fleet } from "./fleet.js";
import { stopOnSignal } from "../kube/stop-on-signal.js";
import type { Rule } from "../kube/auth.js";
import { clusterSeed, nodePluginPod, type PodReplacement } from "./cluster-seed.js";
import { NAMESPACE } from "../support/fixtures.js";

export interface ChildSpec {
  /** What to seed: `volumes` PVs on the fixtures' one node, or a fleet of nodes (`asWritten`: see fleetSeed). */
  seed: { volumes: number } | { fleet: Fleet; asWritten?: boolean } | { cluster: Fleet };
  /** Extra identities (name → username), each with a token and a kubeconfig of its own. */
  identities?: Record<string, string>;
  /** RBAC rules (what SubjectAccessReviews answer), by username. */
  allow?: { username: string; rule: Rule }[];
}

/** Requests by "verb resource", in all and per username; watch events sent per username and resource. */
export type Counts = {
  total: Record<string, number>;
  byUser: Record<string, Record<string, number>>;
  eventsByUser: Record<string, Record<string, number>>;
  /** Lists that named no one object (fieldSelector metadata.name), by resource. */
  listsNotByName: Record<string, number>;
};
export type ToChild =
  | { id: number; type: "counters" | "reset" }
  | { id: number; type: "list"; apiVersion: string; kind: string }
  /** A DaemonSet upgrade's step for these nodes (cluster seed): each node's Pod replaced by a new one. */
  | { id: number; type: "replacePods"; nodes: number[] }
  /** PVs of the cluster changed `perSecond` times a second, round the cluster skipping `skipNodes`' (0 stops); answers with the changes made so far. */
  | { id: number; type: "churn"; perSecond: number; skipNodes: number[]; fleet: Fleet };
export type FromChild =
  | { type: "ready"; kubeconfig: string; kubeconfigs: Record<string, string>; url: string }
  | { type: "counters"; id: number; counters: Counts }
  | { type: "reset"; id: number }
  | { type: "list"; id: number; objects: object[] }
  | { type: "replacePods"; id: number; pods: PodReplacement[] }
  | { type: "churn"; id: number; changes: number };

const send = (m: FromChild) => process.send!(m);
const spec = JSON.parse(process.argv[2]!) as ChildSpec;
const seed = spec.seed;
const api = await startKubeApi({
  tls: true,
  ...("cluster" in seed ? clusterSeed(seed.cluster) : "fleet" in seed ? fleetSeed(seed.fleet, seed.asWritten) : seedObjects(seed.volumes)),
});
for (const { username, rule } of spec.allow ?? []) api.auth.allow(username, rule);
const kubeconfigs: Record<string, string> = {};
for (const [name, username] of Object.entries(spec.identities ?? {})) {
  const token = randomBytes(24).toString("hex");
  api.auth.addToken(token, { username });
  kubeconfigs[name] = api.writeKubeconfig(token, name);
}

// The parent going away (even by SIGKILL) stops it too: it must not outlive the bench.
stopOnSignal(api, { onDisconnect: true });
/** Pods of each node so far: the DaemonSet's first, then each replacement. */
const podOf = new Map<number, string>();
const generation = new Map<number, number>();
async function replacePods(nodes: number[]): Promise<PodReplacement[]> {
  const out: PodReplacement[] = [];
  for (const n of nodes) {
    api.delete("v1", "Pod", NAMESPACE, podOf.get(n) ?? fleetPod(n));
    const g = (generation.get(n) ?? 0) + 1;
    generation.set(n, g);
    const name = `${fleetPod(n)}-r${g}`;
    const created = (await api.create(nodePluginPod(n, name))) as { metadata: { uid: string } };
    podOf.set(n, name);
    out.push({ node: n, pod: name, uid: created.metadata.uid });
  }
  return out;
}

/** Someone else's PVs changing (a resize, a label, a controller's annotation): a label bumped on each, round the cluster. */
let churn: { timer: NodeJS.Timeout; changes: number } | undefined;
function startChurn(perSecond: number, skip: Set<number>, fleet: Fleet): void {
  const targets: string[] = [];
  for (let n = 0; n < fleet.nodes; n++) if (!skip.has(n)) for (let j = 0; j < fleet.volumesPerNode; j++) targets.push(fleetPv(n, j));
  if (targets.length === 0) throw new Error(`no PV outside nodes ${[...skip].map(fleetNode).join(", ")} to change`);
  const tickMs = 100;
  let owed = 0;
  const timer = setInterval(() => {
    for (owed += (perSecond * tickMs) / 1000; owed >= 1; owed--) {
      const name = targets[state.changes % targets.length]!;
      const pv = api.get("v1", "PersistentVolume", undefined, name) as { metadata: { labels?: Record<string, string> } };
      api.update({ ...pv, metadata: { ...pv.metadata, labels: { ...pv.metadata.labels, "bench/touched": String(state.changes) } } });
      state.changes++;
    }
  }, tickMs);
  const state = { timer, changes: 0 };
  churn = state;
}

function counts(): Counts {
  const total = api.counters.snapshot();
  const lists = Object.keys(total).flatMap((k) => (k.startsWith("list ") ? [k.slice("list ".length)] : []));
  const listsNotByName = Object.fromEntries(lists.map((r) => [r, api.counters.byName("list", r)[""] ?? 0]));
  return { total, byUser: api.counters.byUser(), eventsByUser: api.counters.eventsByUser(), listsNotByName };
}

process.on("message", (m: ToChild) => {
  if (m.type === "counters")
    send({ type: "counters", id: m.id, counters: counts() });
  else if (m.type === "list") send({ type: "list", id: m.id, objects: api.list(m.apiVersion, m.kind) });
  else if (m.type === "replacePods") void replacePods(m.nodes).then((pods) => send({ type: "replacePods", id: m.id, pods }));
  else if (m.type === "churn") {
    const changes = churn?.changes ?? 0;
    if (churn) clearInterval(churn.timer);
    churn = undefined;
    if (m.perSecond > 0) startChurn(m.perSecond, new Set(m.skipNodes), m.fleet);
    send({ type: "churn", id: m.id, changes });
  } else {
    api.counters.reset();
    send({ type: "reset", id: m.id });
  }
});
send({ type: "ready", kubeconfig: api.kubeconfigPath, kubeconfigs, url: api.url });
