// The in-memory Kubernetes API in a process of its own, so that serving the sidecar's reads does
// not share an event loop with the bench's load generator (which would slow the measured path).
// The parent talks to it over the IPC channel of fork(): it learns the kubeconfigs, and reads and
// resets the request counters, and lists objects (without counting: the bench's looks cost nothing). Run by kube.ts; argv: <ChildSpec as JSON>.
import { randomBytes } from "node:crypto";
import { startKubeApi } from "../kube/index.js";
import { seedObjects } from "./volumes.js";
import { fleetSeed, type Fleet } from "./fleet.js";
import { stopOnSignal } from "../kube/stop-on-signal.js";

export interface ChildSpec {
  /** What to seed: `volumes` PVs on the fixtures' one node, or a fleet of nodes (`asWritten`: see fleetSeed). */
  seed: { volumes: number } | { fleet: Fleet; asWritten?: boolean };
  /** Extra identities (name → username), each with a token and a kubeconfig of its own. */
  identities?: Record<string, string>;
}

export type Counts = { total: Record<string, number>; byUser: Record<string, Record<string, number>> };
export type ToChild = { id: number; type: "counters" | "reset" } | { id: number; type: "list"; apiVersion: string; kind: string };
export type FromChild =
  | { type: "ready"; kubeconfig: string; kubeconfigs: Record<string, string>; url: string }
  | { type: "counters"; id: number; counters: Counts }
  | { type: "reset"; id: number }
  | { type: "list"; id: number; objects: object[] };

const send = (m: FromChild) => process.send!(m);
const spec = JSON.parse(process.argv[2]!) as ChildSpec;
const api = await startKubeApi({ tls: true, ...("fleet" in spec.seed ? fleetSeed(spec.seed.fleet, spec.seed.asWritten) : seedObjects(spec.seed.volumes)) });
const kubeconfigs: Record<string, string> = {};
for (const [name, username] of Object.entries(spec.identities ?? {})) {
  const token = randomBytes(24).toString("hex");
  api.auth.addToken(token, { username });
  kubeconfigs[name] = api.writeKubeconfig(token, name);
}

// The parent going away (even by SIGKILL) stops it too: it must not outlive the bench.
stopOnSignal(api, { onDisconnect: true });
process.on("message", (m: ToChild) => {
  if (m.type === "counters") send({ type: "counters", id: m.id, counters: { total: api.counters.snapshot(), byUser: api.counters.byUser() } });
  else if (m.type === "list") send({ type: "list", id: m.id, objects: api.list(m.apiVersion, m.kind) });
  else {
    api.counters.reset();
    send({ type: "reset", id: m.id });
  }
});
send({ type: "ready", kubeconfig: api.kubeconfigPath, kubeconfigs, url: api.url });
