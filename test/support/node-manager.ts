// The CSIAddonsNode manager in process against the in-memory API, every KubeApi call recorded
// with its time: the set-up test/unit/sidecar/node/manager*.test.ts share (two files, so that
// their real backoffs run side by side). useNodeManagerHarness() registers the hooks, once per
// process; `api` and `real` are live bindings, set once its before() ran.
import { after, afterEach, before, beforeEach } from "node:test";
import type { KubeApi as TestKube } from "../kube/index.js";
import { createKubeApi } from "../../sidecar/kube/client.js";
import type { KubeApi } from "../../sidecar/kube/api.js";
import { kubeconfigEndpoint } from "../../sidecar/kube/kubeconfig.js";
import { KubeTransport } from "../../sidecar/kube/transport.js";
import { CSIAddonsNodeManager } from "../../sidecar/node/manager.js";
import { startTestKube } from "./cluster.js";
import { captureLogger } from "./capture-logger.js";
import { waitFor } from "./wait.js";
import { CSI_ADDONS_NODE_NAME, NAMESPACE, NODE, POD, POD_UID } from "./fixtures.js";

export const CAN = "csiaddons.openshift.io/v1alpha1";
export const ENDPOINT = `pod://${POD}.${NAMESPACE}:9070`;
type Obj = Record<string, any>;

export let api: TestKube;
/** The sidecar's own KubeApi over the in-memory API. */
export let real: KubeApi;
let transport: KubeTransport | undefined;
const managers: CSIAddonsNodeManager[] = [];

let registered = false;

/** Once per process: two files of these tests in one process (--test-isolation=none) share one API. */
export function useNodeManagerHarness(): void {
  if (registered) return;
  registered = true;
  before(async () => {
    api = await startTestKube();
  });
  // A connection per test: a request a closed manager had already sent still reaches the server,
  // and counted there it would be taken for the next test's (seen under load). Once the server has
  // closed the connection, nothing more of the test before can arrive.
  beforeEach(async () => {
    transport = new KubeTransport(await kubeconfigEndpoint(api.kubeconfigPath));
    real = createKubeApi(transport);
  });
  afterEach(async () => {
    for (const m of managers.splice(0)) m.close();
    transport?.close();
    await waitFor("the test's connections to the API closed", () => api.connectionsOpen() === 0);
    api.faults.clear();
    const o = stored();
    if (o) {
      api.update({ ...o, metadata: { ...o.metadata, finalizers: [] } });
      if (stored()) api.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
    }
    api.counters.reset();
  });
  after(async () => {
    await api?.stop();
  });
}

/** The KubeApi, recording every call (by method, with the time it was made) of one manager. */
function recorded(over: KubeApi) {
  const calls: { method: string; at: number }[] = [];
  const kube = new Proxy(over, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        calls.push({ method: String(prop), at: Date.now() });
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { kube, callsOf: (method: string) => calls.filter((c) => c.method === method), methods: () => calls.map((c) => c.method) };
}

export const stored = () => api.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as Obj | undefined;

/** A manager of our node's object, closed after the test. */
export function manager(confirmTimeoutMs = 60_000, over = real) {
  const { lines, logger } = captureLogger("debug");
  const { kube, callsOf, methods } = recorded(over);
  const m = new CSIAddonsNodeManager({ kube, logger, namespace: NAMESPACE, pod: POD, podUid: POD_UID, nodeId: NODE, endpoint: ENDPOINT, confirmTimeoutMs });
  managers.push(m);
  return { m, lines, callsOf, methods };
}

export const placed = (m: CSIAddonsNodeManager) => waitFor("the CSIAddonsNode in place", () => m.presence.condition.ok);
