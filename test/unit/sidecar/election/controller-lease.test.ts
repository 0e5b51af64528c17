// The controller plugin's Lease from the sidecar's side, over the in-memory API (real
// resourceVersion conflicts): how a LeaseRecord is written and read back as client-go's Lease,
// and how ControllerLease follows the driver's handshakes (one elector per Lease, none after stop).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi as TestKube } from "../../../kube/index.js";
import { createKubeApi } from "../../../../sidecar/kube/client.js";
import { KubeError, type KubeApi } from "../../../../sidecar/kube/api.js";
import { kubeconfigEndpoint } from "../../../../sidecar/kube/kubeconfig.js";
import { KubeTransport } from "../../../../sidecar/kube/transport.js";
import { leaseStore } from "../../../../sidecar/election/lease-store.js";
import { ControllerLease } from "../../../../sidecar/election/controller-lease.js";
import { startTestKube } from "../../../support/cluster.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { waitFor } from "../../../support/wait.js";
import { NAMESPACE, driverInfo } from "../../../support/fixtures.js";

let api: TestKube;
let transport: KubeTransport;
let kube: KubeApi;

before(async () => {
  api = await startTestKube();
  transport = new KubeTransport(await kubeconfigEndpoint(api.kubeconfigPath));
  kube = createKubeApi(transport);
});

after(async () => {
  transport?.close();
  await api?.stop();
});

type Obj = Record<string, any>;
const leaseObject = (name: string) => api.get("coordination.k8s.io/v1", "Lease", NAMESPACE, name) as Obj | undefined;
const signal = () => AbortSignal.timeout(5_000);

describe("leaseStore: a LeaseRecord as client-go's Lease", () => {
  test("written with whole seconds (at least 1) and MicroTime, read back in ms", async () => {
    const s = leaseStore(kube, NAMESPACE, "written");
    assert.equal(await s.read(signal()), undefined, "no Lease yet");
    const at = Date.parse("2026-12-02T10:00:00.123Z");
    assert.equal(await s.write({ holder: "pod-a", durationMs: 1_500, renewTimeMs: at + 1, acquireTimeMs: at, transitions: 2 }, undefined, signal()), true);
    assert.deepEqual(leaseObject("written")!["spec"], {
      holderIdentity: "pod-a",
      leaseDurationSeconds: 2,
      acquireTime: "2026-12-02T10:00:00.123000Z",
      renewTime: "2026-12-02T10:00:00.124000Z",
      leaseTransitions: 2,
    });
    const read = await s.read(signal());
    assert.ok(read?.resourceVersion);
    assert.deepEqual(
      { ...read, resourceVersion: "" },
      { holder: "pod-a", durationMs: 2_000, renewTimeMs: at + 1, acquireTimeMs: at, transitions: 2, resourceVersion: "" },
    );
    // A released Lease's short duration still names a positive whole second, which the API requires.
    assert.equal(await s.write({ ...read!, holder: "", durationMs: 0 }, read!.resourceVersion, signal()), true);
    assert.equal(leaseObject("written")!["spec"]["leaseDurationSeconds"], 1);
  });

  test("a Lease with nothing in its spec reads as client-go's zero values", async () => {
    await kube.createLease({ apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: "empty", namespace: NAMESPACE }, spec: {} }, signal());
    const read = await leaseStore(kube, NAMESPACE, "empty").read(signal());
    assert.deepEqual({ ...read!, resourceVersion: "" }, { holder: "", durationMs: 0, renewTimeMs: 0, acquireTimeMs: 0, transitions: 0, resourceVersion: "" });
  });

  test("a write that lost the race (409, stale version or already created) is false; any other failure is thrown", async () => {
    const s = leaseStore(kube, NAMESPACE, "raced");
    const r = { holder: "pod-a", durationMs: 15_000, renewTimeMs: Date.now(), acquireTimeMs: Date.now(), transitions: 0 };
    assert.equal(await s.write(r, undefined, signal()), true);
    const first = (await s.read(signal()))!.resourceVersion;
    assert.equal(await s.write({ ...r, holder: "pod-b" }, undefined, signal()), false, "created by another candidate first");
    assert.equal(await s.write({ ...r, renewTimeMs: r.renewTimeMs + 1_000 }, first, signal()), true, "a renewal");
    assert.equal(await s.write({ ...r, holder: "pod-b" }, first, signal()), false, "a stale resourceVersion");
    assert.equal(leaseObject("raced")!["spec"]["holderIdentity"], "pod-a");
    const current = (await s.read(signal()))!.resourceVersion;
    api.faults.failNext(1, 500, { resource: "leases" });
    await assert.rejects(s.write(r, current, signal()), (e: unknown) => e instanceof KubeError && e.status === 500, "a 500 is an outage, not a lost race");
  });
});

describe("ControllerLease follows the driver's handshakes", () => {
  const LEASE = "stub-csi-example-com-csi-addons";
  const driver = (controllerService: boolean) => driverInfo({ controllerService });
  const config = { namespace: NAMESPACE, leaseDurationMs: 1_500, renewDeadlineMs: 1_000, retryPeriodMs: 50 };
  const holder = () => leaseObject(LEASE)?.["spec"]["holderIdentity"] as string | undefined;

  test("the same driver again changes nothing; a driver without CONTROLLER_SERVICE releases the Lease before follow() returns; after stop() a handshake starts nothing", async (t) => {
    const { lines, logger } = captureLogger("info");
    const said = (message: string) => lines.filter((l) => l["message"] === message).length;
    const lease = new ControllerLease({ kube, logger, identity: "pod-a", config });
    t.after(() => lease.stop());

    await lease.follow(driver(true));
    await waitFor("pod-a holds the Lease", () => holder() === "pod-a");
    const acquired = leaseObject(LEASE)!["spec"]["acquireTime"];

    await lease.follow(driver(true));
    assert.equal(said("taking part in the controller plugin's leader election"), 1, "one elector for one Lease");
    assert.equal(said("released the Lease"), 0, "not stepped down and up again");
    assert.equal(holder(), "pod-a");
    assert.equal(leaseObject(LEASE)!["spec"]["acquireTime"], acquired);

    await lease.follow(driver(false));
    assert.equal(holder(), "", "released by the time follow() returned");
    assert.equal(said("released the Lease"), 1);

    await lease.stop();
    await lease.follow(driver(true));
    assert.equal(said("taking part in the controller plugin's leader election"), 1, "no elector after stop()");
    assert.equal(holder(), "");
  });
});
