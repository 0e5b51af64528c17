// The sidecar as a well-behaved process — real driver-stub, real sidecar process,
// in-memory Kubernetes API over HTTP.
import { after, afterEach, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { connect } from "node:net";
import { join } from "node:path";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub, type StubState } from "../../support/driver-stub.js";
import { call } from "../../support/grpc.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import {
  CSI_ADDONS_NODE_NAME,
  DAEMONSET,
  DAEMONSET_UID,
  DRIVER,
  NAMESPACE,
  NODE,
  POD,
  ourCrdFile,
  pv,
  volumeAttachment,
  upstreamCrdFile,
} from "../../support/fixtures.js";

const CAN = "csiaddons.openshift.io/v1alpha1";
type Obj = Record<string, any>;

let kube: KubeApi;
const running: { stop(): Promise<unknown> }[] = [];
const track = <T extends { stop(): Promise<unknown> }>(x: T) => (running.push(x), x);

function getNodeObject(): Obj | undefined {
  return kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as Obj | undefined;
}

async function startPair(opts: { stub?: boolean; args?: string[]; state?: StubState } = {}): Promise<{ stub?: DriverStub; sidecar: SidecarProc; dir: string }> {
  const dir = tempDir();
  const stub = opts.stub === false ? undefined : track(await startDriverStub({ dir, state: opts.state }));
  const sidecar = track(await startSidecarProc({ driverSocket: join(dir, "addons.sock"), kubeconfig: kube.kubeconfigPath, args: opts.args }));
  return { stub, sidecar, dir };
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop()));
  for (const o of kube.list(CAN, "CSIAddonsNode", NAMESPACE) as Obj[]) {
    if (o.metadata.finalizers?.length) kube.update({ ...o, metadata: { ...o.metadata, finalizers: [] } });
    if (kube.get(CAN, "CSIAddonsNode", NAMESPACE, o.metadata.name)) kube.delete(CAN, "CSIAddonsNode", NAMESPACE, o.metadata.name);
  }
  kube.faults.clear();
});

describe("sidecar lifecycle", () => {
  before(async () => {
    kube = await startTestKube([pv("pv-slow", { handle: "vol-slow" }), volumeAttachment("pv-slow", "vol-slow")]);
  });
  after(async () => kube.stop());

  test("starts before the driver, logs that it waits, and becomes SERVING once the driver appears", async () => {
    const dir = tempDir();
    const sidecar = track(await startSidecarProc({ driverSocket: join(dir, "addons.sock"), kubeconfig: kube.kubeconfigPath }));
    assert.equal(await sidecar.health(), "NOT_SERVING");
    assert.equal(await sidecar.readyz(), 503);
    await sidecar.proc.waitForOutput(`still waiting for driver at ${join(dir, "addons.sock")}`, 20_000);
    const stub = track(await startDriverStub({ dir }));
    await waitHealth(sidecar, "SERVING");
    assert.equal(await sidecar.readyz(), 200);
    assert.ok(stub.calls({ method: "Probe" }).length >= 1);
  });

  test("creates the CSIAddonsNode with name, owner, spec and annotations of DESIGN 4.3", async () => {
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    const obj = getNodeObject();
    assert.ok(obj, "CSIAddonsNode exists");
    assert.deepEqual(obj.spec.driver, { name: DRIVER, endpoint: `pod://${POD}.${NAMESPACE}:${sidecar.port}`, nodeID: NODE });
    assert.deepEqual(obj.metadata.ownerReferences, [{ apiVersion: "apps/v1", kind: "DaemonSet", name: DAEMONSET, uid: DAEMONSET_UID }]);
    const ann = obj.metadata.annotations;
    assert.equal(ann["sidecar.csiaddons.openshift.io/createdByPodUID"], (kube.get("v1", "Pod", NAMESPACE, POD) as Obj).metadata.uid);
    assert.ok(!Number.isNaN(Date.parse(ann["sidecar.csiaddons.openshift.io/lastUpdatedAt"])));
    assert.equal(ann["sidecar.csiaddons.openshift.io/driverRestartedAt"], undefined, "no restart seen yet");
  });

  test("updates a pre-existing CSIAddonsNode instead of failing, keeping foreign annotations", async () => {
    await kube.create({
      apiVersion: CAN,
      kind: "CSIAddonsNode",
      metadata: { name: CSI_ADDONS_NODE_NAME, namespace: NAMESPACE, annotations: { "example.com/keep": "yes" } },
      spec: { driver: { name: DRIVER, endpoint: "pod://old-pod.csi:9070", nodeID: NODE } },
    });
    const before = getNodeObject()!;
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    const obj = getNodeObject()!;
    assert.equal(obj.metadata.uid, before.metadata.uid, "same object, updated");
    assert.equal(obj.spec.driver.endpoint, `pod://${POD}.${NAMESPACE}:${sidecar.port}`);
    assert.equal(obj.metadata.annotations["example.com/keep"], "yes");
    assert.ok(kube.counters.get("update", "csiaddonsnodes") >= 1);
  });

  test("a stale-resourceVersion conflict is re-read and retried", async () => {
    await kube.create({
      apiVersion: CAN,
      kind: "CSIAddonsNode",
      metadata: { name: CSI_ADDONS_NODE_NAME, namespace: NAMESPACE },
      spec: { driver: { name: DRIVER, endpoint: "pod://old-pod.csi:9070", nodeID: NODE } },
    });
    kube.counters.reset();
    // Hold the sidecar's first PUT long enough to change the object under it.
    kube.faults.latency(1500, { verb: "update", resource: "csiaddonsnodes" });
    const { sidecar } = await startPair();
    await waitFor("the sidecar's first update to arrive", () => kube.counters.get("update", "csiaddonsnodes") >= 1);
    const cur = getNodeObject()!;
    kube.update({ ...cur, metadata: { ...cur.metadata, labels: { touched: "by-test" } } });
    await waitHealth(sidecar, "SERVING", 30_000);
    kube.faults.clear();
    assert.ok(kube.counters.get("update", "csiaddonsnodes") >= 2, "the conflicting update was retried");
    assert.ok(kube.counters.get("get", "csiaddonsnodes") >= 2, "and the object re-read before the retry");
    const obj = getNodeObject()!;
    assert.equal(obj.spec.driver.endpoint, `pod://${POD}.${NAMESPACE}:${sidecar.port}`);
    assert.equal(obj.metadata.labels.touched, "by-test", "the concurrent change was not lost");
    assert.ok(sidecar.logLines().some((l) => l.message === "updated CSIAddonsNode"));
    // A conflict is expected and retried quietly, not treated as a failure.
    assert.ok(!sidecar.logLines().some((l) => l.message === "cannot put CSIAddonsNode in place; retrying"));
  });

  test("created by someone else between our read and our create (409 AlreadyExists): read again and updated, then SERVING", async () => {
    kube.counters.reset();
    // Hold the sidecar's create long enough to create the object under it, with exactly its spec.
    kube.faults.latency(1500, { verb: "create", resource: "csiaddonsnodes" });
    const { sidecar } = await startPair();
    await waitFor("the sidecar's create to arrive", () => kube.counters.get("create", "csiaddonsnodes") >= 1);
    await kube.create({
      apiVersion: CAN,
      kind: "CSIAddonsNode",
      metadata: { name: CSI_ADDONS_NODE_NAME, namespace: NAMESPACE },
      spec: { driver: { name: DRIVER, endpoint: `pod://${POD}.${NAMESPACE}:${sidecar.port}`, nodeID: NODE } },
    });
    await waitHealth(sidecar, "SERVING", 30_000);
    kube.faults.clear();
    assert.ok(getNodeObject()!.metadata.annotations?.["sidecar.csiaddons.openshift.io/createdByPodUID"], "our update reached the object");
  });

  test("a deleted CSIAddonsNode is recreated within seconds", async () => {
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    const uid = getNodeObject()!.metadata.uid;
    kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
    const again = await waitFor(
      "recreated",
      () => {
        const o = getNodeObject();
        return o && o.metadata.uid !== uid ? o : undefined;
      },
      { timeoutMs: 10_000 },
    );
    assert.equal(again.spec.driver.name, DRIVER);
    await waitHealth(sidecar, "SERVING");
  });

  test("an object being deleted (finalizer pending) is waited out, then created anew", async () => {
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    const cur = getNodeObject()!;
    kube.update({ ...cur, metadata: { ...cur.metadata, finalizers: ["csiaddons.openshift.io/node"] } });
    kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
    assert.ok(getNodeObject()!.metadata.deletionTimestamp, "marked for deletion");
    await waitHealth(sidecar, "NOT_SERVING");
    const marked = getNodeObject()!;
    kube.update({ ...marked, metadata: { ...marked.metadata, finalizers: [] } });
    const fresh = await waitFor("created anew", () => {
      const o = getNodeObject();
      return o && o.metadata.uid !== cur.metadata.uid && !o.metadata.deletionTimestamp ? o : undefined;
    });
    assert.equal(fresh.spec.driver.nodeID, NODE);
    await waitHealth(sidecar, "SERVING");
  });

  test("drift: someone else changing spec.driver.endpoint is put back", async () => {
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    const ours = `pod://${POD}.${NAMESPACE}:${sidecar.port}`;
    const cur = getNodeObject()!;
    assert.equal(cur.spec.driver.endpoint, ours);
    kube.update({ ...cur, spec: { driver: { ...cur.spec.driver, endpoint: "pod://someone-else.csi:9999" } } });
    const back = await waitFor(
      "the endpoint put back",
      () => {
        const o = getNodeObject();
        return o?.spec.driver.endpoint === ours ? o : undefined;
      },
      { timeoutMs: 10_000 },
    );
    assert.equal(back.metadata.uid, cur.metadata.uid, "updated in place, not recreated");
    assert.deepEqual(back.spec.driver, { name: DRIVER, endpoint: ours, nodeID: NODE });
    await waitHealth(sidecar, "SERVING");
  });

  test("immutable fields that differ (422) make the sidecar replace the object", async () => {
    await kube.create({
      apiVersion: CAN,
      kind: "CSIAddonsNode",
      metadata: { name: CSI_ADDONS_NODE_NAME, namespace: NAMESPACE },
      spec: { driver: { name: "other.csi.example.com", endpoint: "pod://x.csi:9070", nodeID: NODE } },
    });
    const oldUid = getNodeObject()!.metadata.uid;
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    const obj = getNodeObject()!;
    assert.notEqual(obj.metadata.uid, oldUid);
    assert.equal(obj.spec.driver.name, DRIVER);
    assert.ok(
      sidecar.logLines().some((l) => l.level === "warn" && l.message === "CSIAddonsNode has immutable fields that differ; replacing it"),
      "says why it replaced the object",
    );
  });

  test("the API server down at start: no exit, NOT_SERVING with a clear log, SERVING once it is back", async () => {
    await kube.faults.down();
    const { sidecar } = await startPair();
    await sidecar.proc.waitForOutput("cannot put CSIAddonsNode in place", 20_000);
    assert.equal(await sidecar.health(), "NOT_SERVING");
    await kube.faults.up();
    await waitHealth(sidecar, "SERVING", 30_000);
    assert.ok(getNodeObject());
    assert.equal(sidecar.proc.child.exitCode, null, "still running");
  });

  test("driver killed and restarted 5 times: sidecar keeps running, SERVING again, driverRestartedAt updated each time", async () => {
    const { stub, sidecar, dir } = await startPair();
    await waitHealth(sidecar, "SERVING");
    let current = stub!;
    const seen: string[] = [];
    for (let i = 0; i < 5; i++) {
      await current.kill();
      await waitHealth(sidecar, "NOT_SERVING");
      current = track(await startDriverStub({ dir }));
      const stamp = await waitFor(
        `driverRestartedAt #${i + 1}`,
        () => {
          const v = getNodeObject()?.metadata.annotations?.["sidecar.csiaddons.openshift.io/driverRestartedAt"];
          return v && !seen.includes(v) ? v : undefined;
        },
        { timeoutMs: 20_000 },
      );
      seen.push(stamp);
      await waitHealth(sidecar, "SERVING");
    }
    assert.equal(seen.length, 5);
    assert.deepEqual([...seen].sort(), seen, "timestamps increase");
    assert.equal(sidecar.proc.child.exitCode, null);
    assert.equal(sidecar.logLines().filter((l) => l.message === "driver restarted (new boot id); recording it on the CSIAddonsNode").length, 5);
  });

  test("/metrics exposes csi_sidecar_operations_seconds with the driver's name and csi-lib-utils buckets", async () => {
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    const text = await sidecar.metrics();
    assert.match(text, /# TYPE csi_sidecar_operations_seconds histogram/);
    assert.match(
      text,
      new RegExp(
        `csi_sidecar_operations_seconds_count\\{driver_name="${DRIVER.replace(/\./g, "\\.")}",method_name="/identity.Identity/GetCapabilities",grpc_status_code="OK"\\} 1`,
      ),
    );
    for (const le of ["0.1", "0.25", "0.5", "1", "2.5", "5", "10", "15", "25", "50", "120", "300", "600"]) {
      assert.ok(text.includes(`le="${le}"`), `bucket ${le}`);
    }
    assert.match(text, /process_resident_memory_bytes/);
  });

  test("SIGTERM with a call in flight: NOT_SERVING at once, the call completes, then exit 0", async () => {
    const { stub, sidecar } = await startPair({ state: { volumes: { "vol-slow": { state: "HEALTHY", delayMs: 1500 } } } });
    await waitHealth(sidecar, "SERVING");
    const client = sidecar.healer();
    const inflight = call(client, client.getVolumeHealth, { pvName: "pv-slow" });
    await waitFor("the call to reach the driver", () => stub!.proc.stdout().includes("NodeGetVolumeHealth vol-slow"));
    const exited = sidecar.proc.stop(10_000);
    const r = await inflight;
    assert.ok(r.ok, `in-flight call finished: ${JSON.stringify(r)}`);
    assert.equal(await exited, 0);
    const lines = sidecar.logLines();
    const messages = lines.map((l) => l.message);
    const at = (m: string) => {
      const i = messages.lastIndexOf(m);
      assert.ok(i >= 0, `"${m}" logged`);
      return i;
    };
    assert.ok(at("signal received; shutting down") < at("not ready: NOT_SERVING"));
    assert.equal(lines[at("signal received; shutting down")]!.signal, "SIGTERM");
    assert.ok(at("call served") < at("sidecar stopped"));
  });

  test("SIGTERM: exit 0, controller and HTTP ports closed", async () => {
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    assert.equal(await sidecar.stop(), 0);
    for (const port of [sidecar.port, sidecar.httpPort]) {
      const refused = await new Promise<boolean>((resolve) => {
        const s = connect(port, "127.0.0.1");
        s.once("connect", () => (s.destroy(), resolve(false)));
        s.once("error", () => resolve(true));
      });
      assert.ok(refused, `port ${port} closed`);
    }
    assert.ok(sidecar.logLines().some((l) => l.message === "sidecar stopped"));
  });

  test("SIGINT (Ctrl-C where it is run by hand): the same orderly stop, exit 0", async () => {
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    sidecar.proc.child.kill("SIGINT");
    assert.equal(await sidecar.proc.exited, 0);
    const lines = sidecar.logLines();
    assert.equal(lines.find((l) => l.message === "signal received; shutting down")?.signal, "SIGINT");
    assert.equal(lines.at(-1)?.message, "sidecar stopped");
  });
});

describe("the CSIAddonsNode validates against our own CRD too", () => {
  let ours: KubeApi;
  before(async () => {
    assert.ok(existsSync(ourCrdFile), "deploy/ CRD exists");
    ours = await startTestKube([], { crdFiles: [ourCrdFile] });
    kube = ours;
  });
  after(async () => ours.stop());

  test("created and SERVING under deploy/components/crd", async () => {
    const { sidecar } = await startPair();
    await waitHealth(sidecar, "SERVING");
    assert.equal(getNodeObject()!.spec.driver.name, DRIVER);
  });
});

describe("the CRD installed after the sidecar started", () => {
  let bare: KubeApi;
  before(async () => {
    bare = await startTestKube([], { crdFiles: [] });
    kube = bare;
  });
  after(async () => bare.stop());

  test("not ready, the log says the CRD is missing; SERVING once the CRD is created", async () => {
    const { sidecar } = await startPair();
    await sidecar.proc.waitForOutput("the CSIAddonsNode CRD (csiaddonsnodes.csiaddons.openshift.io) is not installed", 20_000);
    assert.equal(await sidecar.health(), "NOT_SERVING");
    // Retries back off (200 ms doubling to 5 s): a few requests over these seconds, not a hot loop.
    const from = { get: kube.counters.get("get", "csiaddonsnodes"), watch: kube.counters.get("watch", "csiaddonsnodes"), at: Date.now() };
    await waitFor("3 s of retrying", () => Date.now() - from.at >= 3_000, { intervalMs: 100 });
    for (const verb of ["get", "watch"] as const) {
      const n = kube.counters.get(verb, "csiaddonsnodes") - from[verb];
      assert.ok(n <= 15, `${n} ${verb} requests for CSIAddonsNodes in 3 s while the CRD is missing`);
    }
    const crd = parseAllDocuments(readFileSync(upstreamCrdFile, "utf8"))
      .map((d) => d.toJS())
      .find((d) => d?.kind === "CustomResourceDefinition");
    await kube.create(crd);
    await waitHealth(sidecar, "SERVING", 30_000);
    assert.ok(getNodeObject());
  });
});
