// The controller's one place from a heal decision to its reports: which Events an operator sees for
// which answer, what is counted, and the log line of every attempt (retries included, but counted
// and reported as Events only once final).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Reporter, type HealOutcome } from "../../../../controller/report/reporter.js";
import type { EventRecorder } from "../../../../controller/report/events.js";
import { createMetrics } from "../../../../controller/report/metrics.js";
import type { Mode, PvInfo, SidecarInfo } from "../../../../controller/plan/types.js";
import { captureLogger } from "../../../support/capture-logger.js";

const SIDECAR: SidecarInfo = {
  key: "csi/n1",
  namespace: "csi",
  name: "n1",
  uid: "u",
  driver: "drv",
  endpoint: "127.0.0.1:1",
  nodeId: "node-1",
  annotations: {},
  owners: [],
  deleting: false,
};
const PV: PvInfo = { name: "pv-1", uid: "uid-1", driver: "drv", handle: "vol-1", deleting: false, claim: undefined };

function reporter() {
  const events: [string, string, string, string][] = [];
  const recorder = { volume: (pv: PvInfo, type: string, reason: string, message: string) => void events.push([pv.name, type, reason, message]) };
  const metrics = createMetrics(() => ({}));
  const { lines, logger } = captureLogger("info");
  const r = new Reporter(logger, metrics, recorder as unknown as EventRecorder);
  const heals = async () => (await metrics.heals.get()).values.map((v) => ({ ...v.labels, n: v.value }));
  const durations = async () =>
    (await metrics.healSeconds.get()).values
      .filter((v) => v.metricName === "csi_addons_healer_heal_duration_seconds_count")
      .map((v) => ({ ...v.labels, n: v.value }));
  return { r, events, lines, heals, durations };
}

const outcome = (mode: Mode, result: string, more: Partial<HealOutcome> = {}): HealOutcome => ({
  sidecar: SIDECAR,
  pv: PV,
  trigger: mode === "ALWAYS" ? "restart" : "periodic",
  mode,
  attempt: 1,
  durationMs: 1500,
  result,
  health: "HEALTHY",
  message: "",
  ...more,
});

/** The Events each final answer leaves on the volume: [type, reason, message]. */
const CASES: [string, HealOutcome, [string, string, string][]][] = [
  ["a restart heal", outcome("ALWAYS", "HEALED"), [["Normal", "VolumeHealed", "volume healed by drv on node node-1"]]],
  [
    "a check that found the volume broken and healed it",
    outcome("IF_ABNORMAL", "HEALED"),
    [
      ["Warning", "VolumeAbnormal", "health check found the volume broken on node node-1"],
      ["Normal", "VolumeHealed", "volume healed by drv on node node-1"],
    ],
  ],
  ["a check of a healthy volume", outcome("IF_ABNORMAL", "NOT_NEEDED"), []],
  [
    "a check that found it broken beyond healing, with the driver's reason",
    outcome("IF_ABNORMAL", "NOT_HEALABLE", { health: "ABNORMAL", message: "image is gone" }),
    [
      ["Warning", "VolumeAbnormal", "health check found the volume broken on node node-1"],
      ["Warning", "VolumeNotHealable", "by drv on node node-1: image is gone"],
    ],
  ],
  [
    "a restart heal the driver cannot do, without a reason",
    outcome("ALWAYS", "NOT_HEALABLE"),
    [["Warning", "VolumeNotHealable", "by drv on node node-1: the driver cannot heal this volume"]],
  ],
  [
    "a heal that left the volume still ABNORMAL",
    outcome("ALWAYS", "HEALED", { health: "ABNORMAL" }),
    [
      ["Warning", "VolumeAbnormal", "health check found the volume broken on node node-1"],
      ["Normal", "VolumeHealed", "volume healed by drv on node node-1"],
    ],
  ],
  [
    "a call that failed for good",
    outcome("ALWAYS", "FAILED_PRECONDITION", { health: undefined, message: "not on this node" }),
    [["Warning", "VolumeHealFailed", "by drv on node node-1: FAILED_PRECONDITION: not on this node"]],
  ],
  [
    "a failure without a message",
    outcome("IF_ABNORMAL", "UNAVAILABLE", { health: undefined }),
    [["Warning", "VolumeHealFailed", "by drv on node node-1: UNAVAILABLE"]],
  ],
];

for (const [what, o, want] of CASES) {
  test(`Events for ${what}: ${want.map((e) => e[1]).join(", ") || "none"}; counted once by its final answer`, async () => {
    const { r, events, heals } = reporter();
    r.outcome(o);
    assert.deepEqual(
      events,
      want.map(([type, reason, message]) => [PV.name, type, reason, message]),
    );
    assert.deepEqual(await heals(), [{ driver: "drv", trigger: o.trigger, result: o.result, n: 1 }]);
  });
}

test("every attempt is one JSON line with the volume, the sidecar and the answer; duration in seconds; detail only when there is one", () => {
  const { r, lines } = reporter();
  r.outcome(outcome("ALWAYS", "HEALED"));
  r.outcome(outcome("ALWAYS", "UNAVAILABLE", { attempt: 2, health: undefined, message: "connection refused", durationMs: 20 }));
  assert.deepEqual(lines, [
    {
      level: "info",
      message: "heal",
      node: "node-1",
      driver: "drv",
      sidecar: "csi/n1",
      pv: "pv-1",
      volume_id: "vol-1",
      trigger: "restart",
      mode: "ALWAYS",
      result: "HEALED",
      health: "HEALTHY",
      attempt: 1,
      duration: 1.5,
    },
    {
      level: "info",
      message: "heal",
      node: "node-1",
      driver: "drv",
      sidecar: "csi/n1",
      pv: "pv-1",
      volume_id: "vol-1",
      trigger: "restart",
      mode: "ALWAYS",
      result: "UNAVAILABLE",
      attempt: 2,
      duration: 0.02,
      detail: "connection refused",
    },
  ]);
});

test("an attempt that will be retried is logged with its wait and timed, but neither counted as an answer nor reported as an Event", async () => {
  const { r, events, lines, heals, durations } = reporter();
  r.outcome(outcome("ALWAYS", "UNAVAILABLE", { health: undefined, retryInMs: 250 }));
  assert.equal(lines[0]!["retryInMs"], 250);
  assert.deepEqual(await durations(), [{ driver: "drv", mode: "ALWAYS", n: 1 }]);
  assert.deepEqual(await heals(), []);
  assert.deepEqual(events, []);
});

test("pods after a heal: an Event on each pod of the claim's namespace, the restarts asked for; a pod of another namespace is ignored, logged, never evicted", () => {
  const podEvents: [string, string][] = [];
  const restarts: string[] = [];
  const recorder = {
    volume: () => {},
    pod: (p: { name: string }, _type: string, reason: string) => void podEvents.push([p.name, reason]),
  };
  const { lines, logger } = captureLogger("info");
  const r = new Reporter(
    logger,
    createMetrics(() => ({})),
    recorder as unknown as EventRecorder,
    { restartNeeded: (_s, _pv, p) => void restarts.push(p.name) },
  );
  const pv: PvInfo = { ...PV, claim: { namespace: "apps", name: "data", uid: "c" } };
  const pod = (namespace: string, name: string, state: "WHOLE_IN_PLACE" | "RESTART_NEEDED") => ({
    namespace,
    name,
    uid: `uid-${name}`,
    state,
    reason: "",
    message: "",
  });
  r.outcome(
    outcome("ALWAYS", "HEALED", {
      pv,
      pods: [pod("apps", "a", "RESTART_NEEDED"), pod("apps", "b", "WHOLE_IN_PLACE"), pod("kube-system", "x", "RESTART_NEEDED")],
    }),
  );
  assert.deepEqual(podEvents, [
    ["a", "VolumeRestartNeeded"],
    ["b", "VolumeWholeInPlace"],
  ]);
  assert.deepEqual(restarts, ["a"]);
  assert.equal(lines.find((l) => l["message"] === "sidecar named pods outside the volume's claim namespace; ignored")?.["ignored"], 1);
  // Nothing was made again by a NOT_NEEDED: what the pods see is what it was.
  r.outcome(outcome("ALWAYS", "NOT_NEEDED", { pv, pods: [pod("apps", "c", "RESTART_NEEDED")] }));
  assert.equal(podEvents.length, 2);
});
