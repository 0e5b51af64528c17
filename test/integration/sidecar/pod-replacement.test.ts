// The restart signal's contract (deploy/README.md section 6), with real processes: a driver
// container restarting inside a running pod sets driverRestartedAt; replacing the pod (what a
// DaemonSet rolling update does: a new pod with a new UID, a new driver, a new sidecar) changes
// createdByPodUID on the same CSIAddonsNode and leaves driverRestartedAt as it was.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { CSI_ADDONS_NODE_NAME, NAMESPACE, POD, pod } from "../../support/fixtures.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { waitFor } from "../../support/wait.js";

const CAN = "csiaddons.openshift.io/v1alpha1";
const CREATED_BY = "sidecar.csiaddons.openshift.io/createdByPodUID";
const RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";
const NEW_POD = "csi-plugin-fghij";

let kube: KubeApi;
const drivers: DriverStub[] = [];
const sidecars: SidecarProc[] = [];
type Cn = { metadata: { annotations?: Record<string, string>; resourceVersion: string }; spec: { driver: { endpoint: string } } };
const cn = () => kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as Cn | undefined;
const annotation = (key: string) => cn()?.metadata.annotations?.[key];
const uidOf = (name: string) => (kube.get("v1", "Pod", NAMESPACE, name) as { metadata: { uid: string } }).metadata.uid;

before(async () => {
  kube = await startTestKube();
});
after(async () => {
  for (const s of sidecars) await s.stop();
  for (const d of drivers) await d.stop();
  await kube?.stop();
});

async function startPod(name: string, driver: DriverStub): Promise<SidecarProc> {
  // POD_UID comes from the downward API in a cluster; here the flag says the same.
  const s = await startSidecarProc({ driverSocket: driver.addonsSocket, kubeconfig: kube.kubeconfigPath, pod: name, args: [`--pod-uid=${uidOf(name)}`] });
  sidecars.push(s);
  await waitHealth(s, "SERVING");
  return s;
}

test("a pod replacement changes createdByPodUID and leaves driverRestartedAt unchanged", async () => {
  // Pod A, and its driver container restarting once (a new boot id behind the same socket).
  const driverA = await startDriverStub();
  drivers.push(driverA);
  const sidecarA = await startPod(POD, driverA);
  await waitFor("pod A's UID on the CSIAddonsNode", () => annotation(CREATED_BY) === uidOf(POD));
  assert.equal(annotation(RESTARTED_AT), undefined, "a first start is not a restart");
  await driverA.kill();
  const driverA2 = await startDriverStub({ dir: driverA.dir });
  drivers.push(driverA2);
  const restartedAt = await waitFor("driverRestartedAt after the driver container restarted", () => annotation(RESTARTED_AT));
  assert.equal(annotation(CREATED_BY), uidOf(POD), "same pod: createdByPodUID unchanged");

  // The rolling update: pod A goes (sidecar, driver and pod object), pod B comes with its own.
  await sidecarA.stop();
  await driverA2.stop();
  const before = cn()!;
  kube.delete("v1", "Pod", NAMESPACE, POD);
  const podB = pod() as { metadata: { name: string } };
  podB.metadata.name = NEW_POD;
  await kube.create(podB);
  assert.notEqual(uidOf(NEW_POD), before.metadata.annotations![CREATED_BY]);
  const driverB = await startDriverStub();
  drivers.push(driverB);
  await startPod(NEW_POD, driverB);

  await waitFor("pod B's UID on the same CSIAddonsNode", () => annotation(CREATED_BY) === uidOf(NEW_POD));
  const after = cn()!;
  assert.equal(after.metadata.annotations![RESTARTED_AT], restartedAt, "a new pod's sidecar never saw the old driver: driverRestartedAt unchanged");
  assert.match(after.spec.driver.endpoint, new RegExp(`^pod://${NEW_POD}\\.${NAMESPACE}:`));
  assert.equal((kube.list(CAN, "CSIAddonsNode", NAMESPACE) as unknown[]).length, 1, "the same object, not a second one");
});
