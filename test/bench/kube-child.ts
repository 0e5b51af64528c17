// The in-memory Kubernetes API in a process of its own, so that serving the sidecar's reads does
// not share an event loop with the bench's load generator (which would slow the measured path).
// The parent talks to it over the IPC channel of fork(): it learns the kubeconfig, and reads and
// resets the request counters. Run by kube.ts; argv: <volumes>.
import { startKubeApi } from "../kube/index.js";
import { seedObjects } from "./volumes.js";
import { stopOnSignal } from "../kube/stop-on-signal.js";

export type ToChild = { id: number; type: "counters" | "reset" };
export type FromChild =
  | { type: "ready"; kubeconfig: string; url: string }
  | { type: "counters"; id: number; counters: Record<string, number> }
  | { type: "reset"; id: number };

const send = (m: FromChild) => process.send!(m);
const api = await startKubeApi({ tls: true, ...seedObjects(Number(process.argv[2])) });

// The parent going away (even by SIGKILL) stops it too: it must not outlive the bench.
stopOnSignal(api, { onDisconnect: true });
process.on("message", (m: ToChild) => {
  if (m.type === "counters") send({ type: "counters", id: m.id, counters: api.counters.snapshot() });
  else {
    api.counters.reset();
    send({ type: "reset", id: m.id });
  }
});
send({ type: "ready", kubeconfig: api.kubeconfigPath, url: api.url });
