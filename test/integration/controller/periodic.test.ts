// DESIGN 7.2 periodic check and 7.4 reports: between restarts, a jittered IF_ABNORMAL pass per
// sidecar heals what is broken, in one round trip, and leaves healthy volumes alone beyond the
// check; the heal shows up as Events on the PV's claim (naming the PV), and in the metrics.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startControllerProc, type ControllerProc } from "../../support/controller.js";
import { waitFor } from "../../support/wait.js";
import { NAMESPACE } from "../../support/fixtures.js";
import { handleOf, startStack, type Stack } from "../../support/stack.js";

let stack: Stack;
let controller: ControllerProc;

before(async () => {
  stack = await startStack({ volumes: { "pv-bad": { state: "HEALTHY" }, "pv-ok": { state: "HEALTHY" } }, claims: { "pv-bad": "data-bad" } });
  await stack.startSidecar();
  controller = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath, args: ["--check-interval=1s"] });
  await stack.waitHandled();
});

after(async () => {
  await controller?.stop();
  await stack?.stop();
});

type Ev = {
  reason: string;
  type: string;
  count: number;
  involvedObject: { kind: string; name: string; namespace?: string };
  related?: { kind: string; name: string };
  source?: { component?: string };
};
const events = (ns: string) => stack.kube.list("v1", "Event", ns) as Ev[];

const breakPvBad = () =>
  stack.stub.updateState((s) => {
    s.volumes![handleOf("pv-bad")] = { state: "ABNORMAL", reason: "TransportEndpointNotConnected", message: "fuse daemon died", heal: "SUCCEED" };
  });
const periodicHeals = () => controller.heals({ pv: "pv-bad", trigger: "periodic", result: "HEALED" }).length;

/** The tests after the first start from one periodic heal of pv-bad, whether or not the first ran. */
async function healedOnce(): Promise<void> {
  if (periodicHeals() > 0) return;
  breakPvBad();
  await waitFor("the periodic pass to heal pv-bad", () => periodicHeals() > 0, { timeoutMs: 30_000 });
}

test("an ABNORMAL volume is healed by the periodic pass; a HEALTHY one is only checked", async () => {
  const checksBefore = stack.healthChecks("pv-ok");
  await healedOnce();
  await waitFor("another periodic check of pv-ok", () => stack.healthChecks("pv-ok") >= checksBefore + 2, { timeoutMs: 30_000 });
  assert.equal(stack.heals("pv-bad"), 1, "healed once, then healthy");
  assert.equal(stack.heals("pv-ok"), 0, "a healthy volume is never re-staged");
  for (const l of controller.heals({ trigger: "periodic" })) assert.equal(l.mode, "IF_ABNORMAL");
});

test("Events on the bound PVC, naming the PV as related, and not again on the PV; none for NOT_NEEDED", async () => {
  await healedOnce();
  const want = (list: Ev[], kind: string, name: string) =>
    ["VolumeAbnormal", "VolumeHealed"].every((r) =>
      list.some((e) => e.reason === r && e.involvedObject.kind === kind && e.involvedObject.name === name && e.related?.name === "pv-bad"),
    );
  await waitFor("events on the PVC", () => want(events(NAMESPACE), "PersistentVolumeClaim", "data-bad"));
  assert.deepEqual(events("default"), [], "one Event per outcome: none on the PV as well");
  const all = [...events("default"), ...events(NAMESPACE)];
  assert.ok(all.every((e) => e.source?.component === "csi-addons-healer"));
  assert.equal(all.filter((e) => e.involvedObject.name === "pv-ok").length, 0, "nothing for NOT_NEEDED");
  assert.equal(all.find((e) => e.reason === "VolumeAbnormal")!.type, "Warning");
  assert.equal(all.find((e) => e.reason === "VolumeHealed")!.type, "Normal");
});

test("a repeated event is aggregated (count), not sent again", async () => {
  const healedEvents = () => events(NAMESPACE).filter((e) => e.reason === "VolumeHealed" && e.involvedObject.name === "data-bad");
  await healedOnce();
  const count = await waitFor("the first VolumeHealed", () => healedEvents()[0]?.count);
  breakPvBad();
  await waitFor("a second VolumeHealed", () => healedEvents()[0]?.count === count + 1, { timeoutMs: 30_000 });
  assert.equal(healedEvents().length, 1, "one Event object, count 2");
});

test("metrics: heals by driver/trigger/result, latency, abnormal volumes, connections, leader", async () => {
  await healedOnce();
  await waitFor("a periodic check of pv-ok", () => controller.heals({ pv: "pv-ok", trigger: "periodic" }).length > 0, { timeoutMs: 30_000 });
  const m = await controller.metrics();
  assert.match(m, /csi_addons_healer_heals_total\{driver="stub.csi.example.com",trigger="periodic",result="HEALED"\} [1-9]/);
  assert.match(m, /csi_addons_healer_heals_total\{driver="stub.csi.example.com",trigger="periodic",result="NOT_NEEDED"\} [1-9]/);
  assert.match(m, /csi_addons_healer_heal_duration_seconds_count\{driver="stub.csi.example.com",mode="IF_ABNORMAL"\} [1-9]/);
  assert.match(m, /csi_addons_healer_volumes_abnormal\{driver="stub.csi.example.com",node="node-1"\} 0/);
  assert.match(m, /csi_addons_healer_sidecar_connections\{state="serving"\} 1/);
  assert.match(m, /csi_addons_healer_leader 1/);
  assert.match(m, /process_resident_memory_bytes/);
  assert.equal(await controller.readyz(), 200);
});
