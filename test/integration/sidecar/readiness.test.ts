// Readiness and the CSIAddonsNode: readiness says "in place" only while the API keeps confirming the
// CSIAddonsNode, names the failing condition and since when; the object follows its pod's owner.
import { afterEach, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub } from "../../support/driver-stub.js";
import { CSI_ADDONS_NODE_NAME, DAEMONSET, DAEMONSET_UID, NAMESPACE, POD } from "../../support/fixtures.js";
import { tempDir } from "../../support/proc.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { waitFor } from "../../support/wait.js";
import type { HealthCheck } from "../../support/grpc.js";

const CAN = "csiaddons.openshift.io/v1alpha1";
const NEW_DAEMONSET_UID = "5f0c7c1e-1111-4a4a-9d9d-000000000099";
type Obj = Record<string, any>;

let kube: KubeApi;
const running: { stop(): Promise<unknown> }[] = [];
const track = <T extends { stop(): Promise<unknown> }>(x: T) => (running.push(x), x);

beforeEach(async () => {
  kube = await startTestKube();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop()));
  await kube.stop();
});

const nodeObject = () => kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as Obj | undefined;

async function startPair(args: string[] = []): Promise<SidecarProc> {
  const dir = tempDir();
  track(await startDriverStub({ dir }));
  const sidecar = track(await startSidecarProc({ driverSocket: join(dir, "addons.sock"), kubeconfig: kube.kubeconfigPath, args }));
  await waitHealth(sidecar, "SERVING");
  return sidecar;
}

async function readyz(s: SidecarProc): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${s.httpPort}/readyz`);
  return { status: res.status, body: await res.text() };
}

const HealthClient = grpc.makeClientConstructor(healthService as grpc.ServiceDefinition, "grpc.health.v1.Health");

/** grpc.health.v1 Check with its `readiness` trailer. */
async function healthWithReason(s: SidecarProc): Promise<{ status: string; readiness: string }> {
  const client = new HealthClient(s.address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { check: HealthCheck };
  try {
    let trailer!: Promise<grpc.Metadata>;
    const status = await new Promise<string>((resolve, reject) => {
      const call = client.check({ service: "" }, { deadline: Date.now() + 5000 }, (err: Error | null, res: { status: string }) =>
        err ? reject(err) : resolve(res.status),
      );
      trailer = new Promise((r) => call.on("status", (st: grpc.StatusObject) => r(st.metadata)));
    });
    return { status, readiness: String((await trailer).get("readiness")[0] ?? "") };
  } finally {
    client.close();
  }
}

const ISO = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z";

describe("readiness: the CSIAddonsNode confirmed by the API within a bound", () => {
  test("API unreachable past the bound: not ready, saying which condition and since when; ready again once it answers", async () => {
    const sidecar = await startPair(["--node-confirm-timeout=2s"]);
    const ok = await readyz(sidecar);
    assert.equal(ok.status, 200);
    assert.match(ok.body, new RegExp(`^ready: .*CSIAddonsNode ${NAMESPACE}/${CSI_ADDONS_NODE_NAME} in place, last confirmed by the API at ${ISO}`));

    const downAt = Date.now();
    await kube.faults.down();
    const unready = await waitFor(
      "/readyz 503",
      async () => {
        const r = await readyz(sidecar);
        return r.status === 503 ? r : undefined;
      },
      { timeoutMs: 20_000 },
    );
    // Not at the first failed request: only once the bound passed without a confirmation
    // (the last one came at most a third of the bound before the API went down).
    assert.ok(Date.now() - downAt >= 1000, `not ready after ${Date.now() - downAt} ms, before the bound could pass`);
    assert.match(
      unready.body,
      new RegExp(
        `^not ready: CSIAddonsNode ${NAMESPACE}/${CSI_ADDONS_NODE_NAME} not confirmed by the API within 2s \\(last confirmed at ${ISO}\\); last API error: .+ \\(since ${ISO}\\)\\n$`,
      ),
    );
    const h = await healthWithReason(sidecar);
    assert.equal(h.status, "NOT_SERVING");
    assert.match(h.readiness, /^not ready: CSIAddonsNode .* not confirmed by the API within 2s .*\(since \d{4}-/);

    await kube.faults.up();
    await waitHealth(sidecar, "SERVING", 20_000);
    assert.equal((await readyz(sidecar)).status, 200);
    assert.match((await healthWithReason(sidecar)).readiness, /^ready: driver .* connected and ready/);
    // The outage is logged when it starts and when it ends, not once per retry.
    const lines = sidecar.logLines();
    const apiWarnings = lines.filter((l) => l.level === "warn" && /^cannot (confirm|put) (the )?CSIAddonsNode/.test(String(l.message)));
    assert.equal(apiWarnings.length, 1, JSON.stringify(apiWarnings));
    assert.ok(lines.some((l) => l.message === "the Kubernetes API answers again"));
  });

  test("the object lost without a watch event (an API restored without it): not ready as missing, then recreated and ready", async () => {
    const sidecar = await startPair(["--node-confirm-timeout=2s"]);
    const before = nodeObject()!;
    // The watch stream ends and its restart hangs, so only the periodic re-read can notice;
    // the recreation is held back so the missing state can be seen.
    kube.faults.latency(8_000, { verb: "watch", resource: "csiaddonsnodes" });
    kube.faults.latency(2_000, { verb: "create", resource: "csiaddonsnodes" });
    kube.faults.dropWatches();
    kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
    const missing = await waitFor(
      "/readyz says missing",
      async () => {
        const r = await readyz(sidecar);
        return r.status === 503 && r.body.includes("missing") ? r : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    assert.match(missing.body, new RegExp(`^not ready: CSIAddonsNode ${NAMESPACE}/${CSI_ADDONS_NODE_NAME} missing \\(not found\\) \\(since ${ISO}\\)`));
    assert.equal((await healthWithReason(sidecar)).status, "NOT_SERVING");
    await waitHealth(sidecar, "SERVING", 20_000);
    assert.notEqual(nodeObject()!.metadata.uid, before.metadata.uid, "created anew");
    assert.ok(sidecar.logLines().some((l) => l.message === "CSIAddonsNode not found on a periodic check; creating it again"));
    kube.faults.clear();
  });

  test("the object deleted: not ready as missing while it is recreated, with the reason", async () => {
    const sidecar = await startPair();
    kube.faults.latency(2_000, { verb: "create", resource: "csiaddonsnodes" });
    kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
    const missing = await waitFor(
      "/readyz says missing",
      async () => {
        const r = await readyz(sidecar);
        return r.status === 503 ? r : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    assert.match(missing.body, /CSIAddonsNode .* missing \((deleted|not found)\)/);
    await waitHealth(sidecar, "SERVING", 20_000);
    kube.faults.clear();
  });
});

describe("the watch resumes from the sidecar's own write", () => {
  test("a deletion right after the first create is not missed, even when the watch request arrives after it", async () => {
    // The create is slow enough for a watch to be sent meanwhile, and the watch is processed
    // only after the deletion below: a watch started "now" would never hear of it.
    kube.faults.latency(1_000, { verb: "create", resource: "csiaddonsnodes" });
    kube.faults.latency(2_000, { verb: "watch", resource: "csiaddonsnodes" });
    const sidecar = await startPair();
    const first = nodeObject()!;
    kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
    kube.faults.clear();
    const again = await waitFor("recreated", () => {
      const o = nodeObject();
      return o && o.metadata.uid !== first.metadata.uid ? o : undefined;
    });
    assert.ok(again);
    await waitHealth(sidecar, "SERVING");
  });
});

describe("the CSIAddonsNode follows its pod's controlling owner", () => {
  /** What an orphaning delete and a recreation of the DaemonSet leave: the pod adopted by a new uid. */
  async function recreateDaemonSet(): Promise<void> {
    const ds = kube.get("apps/v1", "DaemonSet", NAMESPACE, DAEMONSET) as Obj;
    kube.delete("apps/v1", "DaemonSet", NAMESPACE, DAEMONSET);
    const { resourceVersion: _rv, creationTimestamp: _ct, ...meta } = ds.metadata;
    await kube.create({ ...ds, metadata: { ...meta, uid: NEW_DAEMONSET_UID } });
    const pod = kube.get("v1", "Pod", NAMESPACE, POD) as Obj;
    const refs = pod.metadata.ownerReferences.map((o: Obj) => ({ ...o, uid: NEW_DAEMONSET_UID }));
    kube.update({ ...pod, metadata: { ...pod.metadata, ownerReferences: refs } });
  }
  const newRef = { apiVersion: "apps/v1", kind: "DaemonSet", name: DAEMONSET, uid: NEW_DAEMONSET_UID };

  test("DaemonSet recreated under the same name while the pod survives: the recreated object names the new uid", async () => {
    await startPair();
    const first = nodeObject()!;
    assert.equal(first.metadata.ownerReferences[0].uid, DAEMONSET_UID);
    await recreateDaemonSet();
    // The garbage collector deletes the object whose owner uid is gone (the in-memory API has none).
    kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
    const again = await waitFor("recreated", () => {
      const o = nodeObject();
      return o && o.metadata.uid !== first.metadata.uid ? o : undefined;
    });
    assert.deepEqual(again.metadata.ownerReferences, [newRef]);
  });

  test("the pod's owner changes while the object stays: its ownerReferences follow within the confirmation interval", async () => {
    const sidecar = await startPair(["--node-confirm-timeout=1500ms"]);
    const uid = nodeObject()!.metadata.uid;
    await recreateDaemonSet();
    const updated = await waitFor("ownerReferences updated", () => {
      const o = nodeObject();
      return o?.metadata.ownerReferences?.[0]?.uid === NEW_DAEMONSET_UID ? o : undefined;
    });
    assert.equal(updated.metadata.uid, uid, "updated in place, not recreated");
    assert.deepEqual(updated.metadata.ownerReferences, [newRef], "no reference to the former owner is left");
    assert.ok(sidecar.logLines().some((l) => l.message === "the pod's controlling owner changed; updating the CSIAddonsNode"));
    await waitHealth(sidecar, "SERVING");
  });
});
