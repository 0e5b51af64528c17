// A forged CSIAddonsNode cannot make the controller hand out a node's token: the controller (as it
// ships, per-node tokens, TLS) calls a sidecar only at a pod:// endpoint whose pod is in the
// object's namespace, runs on the node the object claims, belongs to its owner and runs as an
// expected ServiceAccount. Four objects claiming node-1 point at a listener that counts every
// connection (where an attacker would read the token): a node plugin's pod on node-2, a plain
// host:port, a pod of another namespace, a pod of another ServiceAccount. None is connected to;
// each gets one Warning Event and a count in the metric; node-1's real sidecar is still healed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { startControllerProc, type ControllerProc } from "../../support/controller.js";
import { tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import { DAEMONSET, DAEMONSET_UID, DRIVER, NAMESPACE, NODE, onLocalhost } from "../../support/fixtures.js";
import { HEALER_USER, allowHealer, makeTlsFiles, type TlsFiles } from "../../support/secure-sidecar.js";
import { CAN, startStack, type Stack } from "../../support/stack.js";

const SA = HEALER_USER.split(":").pop()!;
const OWNER = { apiVersion: "apps/v1", kind: "DaemonSet", name: DAEMONSET, uid: DAEMONSET_UID, controller: true };
let stack: Stack;
let tls: TlsFiles;
let controller: ControllerProc | undefined;
let listener: Server;
const connections: Socket[] = [];
let port: number;

/** A pod the attacker's endpoint names: IP 127.0.0.1, where the counting listener is. */
const attackerPod = (name: string, o: { namespace?: string; nodeName?: string; serviceAccountName?: string } = {}) =>
  onLocalhost({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: o.namespace ?? NAMESPACE, ownerReferences: [OWNER] },
    spec: {
      nodeName: o.nodeName ?? NODE,
      ...(o.serviceAccountName ? { serviceAccountName: o.serviceAccountName } : {}),
      containers: [{ name: "c", image: "i" }],
    },
  });

/** A CSIAddonsNode claiming node-1 at `endpoint`, owned as the real one is. */
const forged = (name: string, endpoint: string) => ({
  apiVersion: CAN,
  kind: "CSIAddonsNode",
  metadata: { name, namespace: NAMESPACE, ownerReferences: [OWNER] },
  spec: { driver: { name: DRIVER, endpoint, nodeID: NODE } },
});

const FORGERIES = [
  { name: "forged-other-node", reason: "node", says: /runs on node node-2, not on node node-1/ },
  { name: "forged-plain-address", reason: "unverifiable", says: /names no pod, so it cannot be verified as node node-1's sidecar/ },
  { name: "forged-other-namespace", reason: "namespace", says: /names pod intruders\/in-other-ns, outside the CSIAddonsNode's namespace csi/ },
  { name: "forged-other-account", reason: "service-account", says: /runs as ServiceAccount csi\/intruder, not one of --sidecar-service-accounts/ },
] as const;

before(async () => {
  listener = createServer((s) => (connections.push(s), s.destroy()));
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  port = (listener.address() as { port: number }).port;
  tls = await makeTlsFiles(tempDir("ctl-endpoints-"));
  stack = await startStack({
    volumes: { "pv-a": { state: "HEALTHY" } },
    sidecarArgs: ["--enable-auth=true", `--tls-cert-file=${tls.certFile}`, `--tls-key-file=${tls.keyFile}`],
    tls,
    extra: [
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: SA, namespace: NAMESPACE } },
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "intruders" } },
      attackerPod("plugin-on-node-2", { nodeName: "node-2" }),
      attackerPod("in-other-ns", { namespace: "intruders" }),
      attackerPod("as-intruder", { serviceAccountName: "intruder" }),
    ],
  });
  allowHealer(stack.kube);
  await stack.startSidecar();
  const endpoints = [
    `pod://plugin-on-node-2.${NAMESPACE}:${port}`,
    `127.0.0.1:${port}`,
    `pod://in-other-ns.intruders:${port}`,
    `pod://as-intruder.${NAMESPACE}:${port}`,
  ];
  for (const [i, f] of FORGERIES.entries()) await stack.kube.create(forged(f.name, endpoints[i]!));
});

after(async () => {
  await controller?.stop();
  await stack?.stop();
  for (const s of connections) s.destroy();
  await new Promise((resolve) => listener?.close(resolve));
});

test("CSIAddonsNodes claiming node-1 at endpoints that are not its sidecar pod get no connection (so no token, no call), one Warning Event and a metric each; node-1's sidecar is healed", async () => {
  controller = await startControllerProc({
    kubeconfig: stack.kube.kubeconfigPath,
    args: [
      "--sidecar-tls=true",
      `--sidecar-ca-file=${tls.certFile}`,
      "--sidecar-tls-server-name=localhost",
      `--service-account=${NAMESPACE}/${SA}`,
      `--sidecar-service-accounts=${NAMESPACE}/default`,
      "--retry-max-backoff=200ms",
    ],
  });
  const c = controller;
  // The real sidecar (its pod runs as csi/default on node-1) is called and its first sight recorded.
  await stack.waitHandled();
  assert.deepEqual(
    c.heals({ trigger: "first-sight", sidecar: `${NAMESPACE}/${stack.csiAddonsNode()!.metadata.name}` }).map((l) => l.result),
    ["NOT_NEEDED"],
  );
  const refusedEvents = () => (stack.kube.list("v1", "Event", NAMESPACE) as any[]).filter((e) => e.reason === "SidecarEndpointRefused");
  await waitFor("a refusal Event on each forged object", () => FORGERIES.every((f) => refusedEvents().some((e) => e.involvedObject.name === f.name)), {
    timeoutMs: 30_000,
  });
  // Let the passes of the forged objects retry a few times (backoff up to 200 ms): still one Event each.
  const waits = () => c.logLines().filter((l) => l.message === "waiting for sidecar" && String(l.sidecar).includes("forged-")).length;
  await waitFor("the forged objects' passes to retry", () => waits() >= 4 * FORGERIES.length, { timeoutMs: 30_000 });
  for (const f of FORGERIES) {
    const events = refusedEvents().filter((e) => e.involvedObject.name === f.name);
    assert.equal(events.length, 1, `${f.name}: one Event`);
    assert.equal(events[0].type, "Warning");
    assert.equal(events[0].involvedObject.kind, "CSIAddonsNode");
    assert.match(events[0].message, f.says, f.name);
  }
  assert.equal(connections.length, 0, "nothing connected to where the forged objects point: no token was sent, no call made");
  const metrics = await c.metrics();
  for (const f of FORGERIES) {
    assert.match(metrics, new RegExp(`^csi_addons_healer_sidecar_endpoints_refused_total\\{driver="${DRIVER}",reason="${f.reason}"\\} 1$`, "m"), f.reason);
  }
  assert.match(metrics, new RegExp(`^csi_addons_healer_sidecar_connections\\{state="refused"\\} ${FORGERIES.length}$`, "m"));
  // The token of node-1 was asked for node-1's real sidecar only, and no log line carries it.
  const issued = stack.kube.auth.tokensOf(HEALER_USER);
  assert.ok(issued.length >= 1);
  for (const t of issued) assert.ok(!c.proc.stdout().includes(t.token), "no token in the controller's log");
});
