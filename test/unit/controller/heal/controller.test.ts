// heal/controller: what starts, schedules, supersedes and ends passes as CSIAddonsNodes change:
// restart markers, periodic checks, leadership and shutdown, with the pass fakes of heal-fakes.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { status } from "@grpc/grpc-js";
import { WorkQueue } from "../../../../controller/heal/queue.js";
import type { HealAnswer } from "../../../../controller/sidecars/connection.js";
import { SidecarPool } from "../../../../controller/sidecars/pool.js";
import { Reporter } from "../../../../controller/report/reporter.js";
import type { EventRecorder } from "../../../../controller/report/events.js";
import type { PvInfo, SidecarInfo, SidecarPod } from "../../../../controller/plan/types.js";
import { createLogger } from "../../../../common/log/logger.js";
import { waitFor, within } from "../../../support/wait.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { gatedSleep } from "../../../support/gated-sleep.js";
import { EventEmitter } from "node:events";
import { HealController } from "../../../../controller/heal/controller.js";
import { KubeRequestError, type ClusterView } from "../../../../controller/kube/api.js";
import { createMetrics } from "../../../../controller/report/metrics.js";
import { CREATED_BY_POD_UID, DRIVER_RESTARTED_AT, HANDLED_RESTART, restartMarker } from "../../../../controller/plan/trigger.js";
import { activeHandles } from "../../../support/handles.js";
import { SIDECAR, PVS, Fake, fake, NEVER, HEALED, HANDLED, other } from "../../../support/heal-fakes.js";

// ---- the controller over passes ----------------------------------------------------------------

interface ControllerOptions {
  checkIntervalMs?: number;
  /** The controller's jitter: one call per periodic check it schedules (and per marker-write backoff). */
  random?: () => number;
  /** More sidecars the view knows; their volumes are named after them ("n2-pv-1", ...). */
  others?: SidecarInfo[];
}

function controllerOf(f: Fake, sidecar: SidecarInfo, patch: (marker: string) => Promise<void>, o: ControllerOptions = {}) {
  const known = new Map([sidecar, ...(o.others ?? [])].map((s) => [s.key, s]));
  /** Keys the controller looked up in the view (its periodic timers do, when they fire). */
  const lookups: string[] = [];
  const view = Object.assign(new EventEmitter(), {
    sidecars: () => [...known.values()],
    sidecar: (key: string) => (lookups.push(key), known.get(key)),
    volumesOf: (s: SidecarInfo) => (s.key === sidecar.key ? PVS : PVS.map((pv) => ({ ...pv, name: `${s.name}-${pv.name}` }))),
    pv: () => undefined,
  }) as unknown as ClusterView;
  const metrics = createMetrics(() => f.deps.pool.countByState());
  const { lines, logger } = captureLogger("info");
  const kube = {
    patchCSIAddonsNodeAnnotation: async (_ns: string, _name: string, _key: string, marker: string) => patch(marker),
  };
  const c = new HealController({
    view,
    kube,
    pass: { ...f.deps, latest: (key) => known.get(key) },
    metrics,
    logger,
    checkIntervalMs: o.checkIntervalMs ?? 0,
    ...(o.random ? { random: o.random } : {}),
  });
  /** What the informer reports after a change of the object. */
  const set = (type: "add" | "update", s: SidecarInfo) => {
    known.set(s.key, s);
    view.emit("sidecar", type, s);
  };
  const update = (annotations: Record<string, string>) => set("update", { ...known.get(sidecar.key)!, annotations });
  const remove = (key = sidecar.key) => {
    const s = known.get(key)!;
    known.delete(key);
    view.emit("sidecar", "delete", s);
  };
  const timedRestarts = async () =>
    (await metrics.restartHealSeconds.get()).values.find((v) => v.metricName === "csi_addons_healer_restart_heal_duration_seconds_count")?.value ?? 0;
  return {
    c,
    view,
    set,
    update,
    remove,
    lookups,
    timedRestarts,
    lines,
    metrics,
  };
}

/**
 * A leading controller over SIDECAR whose heals wait until released; `cutShort()` starts a pass
 * (a restart heal by default), and while its calls are in flight deletes the object (the upstream controller deletes one
 * it cannot reach), then lets the calls answer.
 */
function restartCutShort(t: { after(fn: () => unknown): void }) {
  let release = () => {};
  let held = Promise.resolve();
  const f = fake(() => HEALED, { hold: () => held });
  const patched: string[] = [];
  const restarted = {
    ...HANDLED,
    [DRIVER_RESTARTED_AT]: "2026-12-03T10:00:00.000Z",
  };
  const ctl = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async (m) => void patched.push(m));
  t.after(() => (release(), ctl.c.close()));
  ctl.c.lead();
  /** `change`: the object as changed to start the pass (by default a driver restart, healed with ALWAYS). */
  const cutShort = async (change: Record<string, string> = restarted) => {
    held = new Promise<void>((r) => (release = r));
    const before = f.calls.length;
    ctl.update(change);
    await waitFor("the restart heal in flight", () => f.calls.length === before + 2);
    ctl.remove();
    release();
  };
  const passes = () => ctl.lines.filter((l) => l["message"] === "restart heal");
  return { ...ctl, f, patched, restarted, cutShort, passes };
}

const noStates = {
  serving: 0,
  not_serving: 0,
  unreachable: 0,
  failing: 0,
  unresolved: 0,
  refused: 0,
};

const ABNORMAL: HealAnswer = {
  result: "NOT_HEALABLE",
  health: "ABNORMAL",
  message: "image gone",
  pods: [],
};

const abnormalSeries = async (metrics: ReturnType<typeof createMetrics>) =>
  (await metrics.registry.metrics()).split("\n").filter((l) => l.startsWith("csi_addons_healer_volumes_abnormal{"));

test("controller: a first sight is checked and its marker recorded but not timed as a restart; a restart is; close() stops listening", async (t) => {
  const f = fake(() => HEALED);
  const patched: string[] = [];
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const { c, view, update, timedRestarts, lines, metrics } = controllerOf(f, { ...SIDECAR, annotations: first }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("the first-sight marker recorded", () => patched.length === 1);
  assert.equal(await timedRestarts(), 0, "first sight is not a restart");
  // The driver restarted 5 s before the controller saw it: the heal is timed from the restart.
  update({
    ...first,
    [HANDLED_RESTART]: patched[0]!,
    [DRIVER_RESTARTED_AT]: new Date(Date.now() - 5_000).toISOString(),
  });
  await waitFor("the restart's marker recorded", () => patched.length === 2);
  assert.equal(await timedRestarts(), 1);
  const sum = (await metrics.restartHealSeconds.get()).values.find((v) => v.metricName === "csi_addons_healer_restart_heal_duration_seconds_sum")?.value;
  assert.ok(sum !== undefined && sum >= 5 && sum < 60, `seconds from the driver's restart to the last volume answered: ${String(sum)}`);
  // The one line an operator greps for: which restart of which node, how every volume answered, how long.
  const done = lines.filter((l) => l["message"] === "restart heal done");
  assert.deepEqual(
    done.map((l) => [l["sidecar"], l["marker"], l["answers"]]),
    [
      [SIDECAR.key, patched[0], { HEALED: 2 }],
      [SIDECAR.key, patched[1], { HEALED: 2 }],
    ],
  );
  for (const l of done) assert.ok(typeof l["seconds"] === "number" && l["seconds"] >= 0 && l["seconds"] < 60, `seconds: ${String(l["seconds"])}`);
  await c.close();
  assert.equal(view.listenerCount("sidecar"), 0);
});

test("controller: a CSIAddonsNode gone (404) while its marker is written is not written again", async (t) => {
  const f = fake(() => HEALED);
  let attempts = 0;
  const { c, lines } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async () => {
    attempts++;
    throw new KubeRequestError(404, 'csiaddonsnodes "n1" not found');
  });
  t.after(() => c.close());
  c.lead();
  // waitFor probes from a timer, so the write's rejection (and a retry's warning, which would come
  // in the same turn) has been handled by the time the probe sees the attempt.
  await waitFor("the marker write tried", () => attempts === 1);
  assert.deepEqual(
    lines.filter((l) => l["level"] === "warn").map((l) => l["message"]),
    [],
    "a 404 is not a failure to retry",
  );
});

test("controller: a deleted CSIAddonsNode's pass ends: its heals still waiting in the queue are never sent", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, {
    hold: () => held,
    queue: new WorkQueue({ perNode: 1, global: 1 }),
  });
  const patched: string[] = [];
  const { c, remove } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async (m) => void patched.push(m));
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("pv-1 in flight, pv-2 waiting for the sidecar's one slot", () => f.calls.length === 1 && f.deps.queue.size === 1);
  remove();
  release();
  await within("the queue to be idle", f.deps.queue.idle());
  assert.deepEqual(f.calls, ["pv-1"], "pv-2 is not sent to a sidecar that is gone");
  assert.deepEqual(patched, []);
});

test("controller: a CSIAddonsNode deleted and made again (its handled marker lost with it) is not seen anew: the marker handled here is recorded on it, nothing called", async (t) => {
  const f = fake(() => HEALED);
  const patched: string[] = [];
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const { c, set, update, remove } = controllerOf(f, { ...SIDECAR, annotations: first }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("the first-sight marker recorded", () => patched.length === 1);
  update({ ...first, [HANDLED_RESTART]: patched[0]! });
  remove();
  // The sidecar makes its object again when it is deleted (DESIGN 4.3): same pod, no handled marker.
  set("add", { ...SIDECAR, annotations: first });
  await waitFor("the recreated object's marker recorded", () => patched.length === 2);
  assert.deepEqual(patched, ["pod-1+", "pod-1+"]);
  assert.deepEqual(f.calls, ["pv-1", "pv-2"]);
});

test("controller: a CSIAddonsNode deleted during its restart heal and made again by its sidecar (same restart, no handled marker) is healed with ALWAYS, not downgraded to a first-sight check", async (t) => {
  const { set, update, remove, patched, restarted, cutShort, passes } = restartCutShort(t);
  await cutShort();
  // The sidecar makes it again at once.
  const { [HANDLED_RESTART]: _gone, ...recreated } = restarted;
  set("add", { ...SIDECAR, annotations: recreated });
  await waitFor("the restart's marker recorded", () => patched.length === 1);
  assert.deepEqual(patched, [restartMarker(restarted)]);
  assert.deepEqual(
    passes().map((l) => [l["trigger"], l["mode"], l["attachable"]]),
    [
      ["restart", "ALWAYS", 2],
      ["restart", "ALWAYS", 2],
    ],
  );

  // Deleted once more, now handled: made again, it is not healed again; the marker is recorded on it.
  update({ ...recreated, [HANDLED_RESTART]: patched[0]! });
  remove();
  set("add", { ...SIDECAR, annotations: recreated });
  await waitFor("the marker recorded again", () => patched.length === 2);
  assert.equal(passes().length, 2, "no third pass");
});

test("controller: a remembered cut-short restart does not apply to the object made again for another restart, nor to one already handled", async (t) => {
  const { set, f, patched, restarted, cutShort, passes } = restartCutShort(t);
  // Made again by a new node-plugin pod: a first sight of that pod, checked (no restart of it is known).
  await cutShort();
  set("add", { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-2" } });
  await waitFor("pod-2's first sight recorded", () => patched.length === 1);
  assert.deepEqual(
    passes()
      .map((l) => [l["trigger"], l["mode"], l["marker"]])
      .at(-1),
    ["first-sight", "IF_ABNORMAL", "pod-2+"],
  );
  // Made again with the restart already recorded (another replica healed it): nothing to do.
  set("update", { ...SIDECAR, annotations: HANDLED });
  await cutShort();
  const [count, calls] = [passes().length, f.calls.length];
  set("add", {
    ...SIDECAR,
    annotations: { ...restarted, [HANDLED_RESTART]: restartMarker(restarted) },
  });
  await new Promise((r) => setImmediate(r));
  assert.equal(passes().length, count);
  assert.equal(f.calls.length, calls);
});

test("controller: a first-sight check cut short by the object's deletion is a check again when the object is made again, not a heal with ALWAYS", async (t) => {
  const { set, patched, cutShort, passes } = restartCutShort(t);
  // No handled marker: a first sight of pod-1, checked.
  const firstSight = { [CREATED_BY_POD_UID]: "pod-1" };
  await cutShort(firstSight);
  set("add", { ...SIDECAR, annotations: firstSight });
  await waitFor("the check's marker recorded", () => patched.length === 1);
  assert.deepEqual(
    passes().map((l) => [l["trigger"], l["mode"]]),
    [
      ["first-sight", "IF_ABNORMAL"],
      ["first-sight", "IF_ABNORMAL"],
    ],
  );
});

test("controller: only a check interval of 0 turns the periodic checks off: one of 1 ms checks", async (t) => {
  const f = fake(() => HEALED);
  const { c } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, { checkIntervalMs: 1 });
  t.after(() => c.close());
  c.lead();
  await waitFor("a periodic check", () => f.outcomes.length >= 2);
});

test("controller: leadership lost and regained: the periodic checks start again", async (t) => {
  const f = fake(() => HEALED);
  const { c } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, { checkIntervalMs: 100, random: () => 0 });
  t.after(() => c.close());
  c.lead();
  await waitFor("a periodic check", () => f.outcomes.length === 2);
  c.unlead();
  const before = f.outcomes.length;
  c.lead();
  await waitFor("a periodic check after leading again", () => f.outcomes.length >= before + 2, { timeoutMs: 5_000 });
});

test("controller: one periodic check scheduled per sidecar however often its object changes, none for one being deleted, and none that keeps the process alive", (t) => {
  const f = fake(() => HEALED);
  let scheduled = 0;
  const { c, update } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, {
    checkIntervalMs: 3_600_000,
    random: () => (scheduled++, 0.5),
    others: [{ ...other(2), deleting: true }],
  });
  t.after(() => c.close());
  const timers = () => activeHandles("Timeout");
  const before = timers();
  c.lead();
  assert.equal(scheduled, 1, "n1's check; none for n2, which is being deleted");
  assert.equal(timers(), before, "the periodic timer is unref'd");
  for (let i = 0; i < 3; i++)
    update({
      ...HANDLED,
      "sidecar.csiaddons.openshift.io/lastUpdatedAt": `2026-12-03T00:00:0${i}Z`,
    });
  assert.equal(scheduled, 1, "changes of the object do not add checks");
  assert.deepEqual(f.calls, []);
});

test("controller: a change of the object during a periodic check schedules the next one; the check's end then adds none", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, { hold: () => held });
  let scheduled = 0;
  // The first check comes due at 0.9 x 100 ms; the next ones an hour later.
  const { c, update } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, {
    checkIntervalMs: 100,
    random: () => (scheduled++ === 0 ? 0 : 0.5),
  });
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("the periodic check in flight", () => f.calls.length === 2);
  assert.equal(scheduled, 1);
  // While the check runs, the object changes: a timer for the next check is set then.
  update({
    ...HANDLED,
    "sidecar.csiaddons.openshift.io/lastUpdatedAt": "2026-12-04T00:00:00Z",
  });
  assert.equal(scheduled, 2);
  release();
  await waitFor("the check answered", () => f.outcomes.length === 2);
  await new Promise((r) => setImmediate(r));
  assert.equal(scheduled, 2, "one timer for the node, not a second chain of checks");
});

test("controller: a restart's heals go before the periodic checks of other nodes already waiting for a slot", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, {
    hold: () => held,
    queue: new WorkQueue({ perNode: 4, global: 1 }),
  });
  const { c, set } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, { checkIntervalMs: 100, random: () => 0 });
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("n1's periodic check: one call in flight, one waiting", () => f.calls.length === 1 && f.deps.queue.size === 1);
  set("add", other(2, { ...HANDLED, [DRIVER_RESTARTED_AT]: "2026-12-04T10:00:00.000Z" }));
  await waitFor("n2's restart heals queued", () => f.deps.queue.size === 3);
  release();
  await waitFor("every heal sent", () => f.calls.length >= 4);
  assert.deepEqual(f.calls.slice(0, 4), ["pv-1", "n2-pv-1", "n2-pv-2", "pv-2"]);
});

test("controller: a periodic check comes due only for a sidecar still there and not being deleted", async (t) => {
  const f = fake(() => HEALED);
  // n1, n2, n3 come due at 0.9, 1.0 and 1.1 times the interval, in that order.
  const jitter = [0, 0.5, 1];
  let i = 0;
  const { c, set, remove, lookups } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, {
    checkIntervalMs: 200,
    random: () => jitter[i++ % jitter.length]!,
    others: [other(2), other(3)],
  });
  t.after(() => c.close());
  c.lead();
  remove(); // n1 deleted
  set("update", { ...other(2), deleting: true });
  await waitFor("n3's periodic check", () => f.calls.length >= 2);
  assert.deepEqual(f.calls, ["n3-pv-1", "n3-pv-2"], "n2, being deleted, is not checked");
  assert.ok(!lookups.includes(SIDECAR.key), "the deleted n1's timer was cleared, not left to fire");
});

test("controller: a newer restart drops the older pass's heals still waiting in the queue at once", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, {
    hold: () => held,
    queue: new WorkQueue({ perNode: 1, global: 1 }),
  });
  const patched: string[] = [];
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const { c, update } = controllerOf(f, { ...SIDECAR, annotations: first }, async (m) => void patched.push(m));
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("pv-1 in flight, pv-2 waiting for the sidecar's one slot", () => f.calls.length === 1 && f.deps.queue.size === 1);
  const restartedAt = "2026-12-03T00:00:00Z";
  update({ ...first, [DRIVER_RESTARTED_AT]: restartedAt });
  assert.equal(f.deps.queue.size, 0, "the superseded pass's pv-2 no longer waits");
  release();
  await waitFor("the newer marker recorded", () => patched.length === 1);
  assert.deepEqual(patched, [`pod-1+${restartedAt}`]);
  assert.deepEqual(f.calls, ["pv-1", "pv-1", "pv-2"]);
});

test("controller: a driver that heals but cannot check has its first sight recorded with nothing called, so its next restart is healed; one without HEAL_VOLUME is left alone", async (t) => {
  const f = fake(() => HEALED, {
    caps: { healVolume: true, getVolumeHealth: false },
  });
  const patched: string[] = [];
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const { c, update, lines, metrics } = controllerOf(f, { ...SIDECAR, annotations: first }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("the first-sight marker recorded", () => patched.length === 1, {
    timeoutMs: 5_000,
  });
  assert.deepEqual(f.calls, [], "nothing to check with");
  assert.deepEqual(await abnormalSeries(metrics), [], "a node whose volumes were not checked is not said to have 0 abnormal");
  assert.deepEqual(
    lines.filter((l) => l["message"] === "first sight not checked").map((l) => l["reason"]),
    ["driver drv does not offer VolumeHealer GET_VOLUME_HEALTH"],
  );
  update({
    ...first,
    [HANDLED_RESTART]: patched[0]!,
    [DRIVER_RESTARTED_AT]: "2026-12-03T00:00:00Z",
  });
  await waitFor("the restart's marker recorded", () => patched.length === 2);
  assert.deepEqual(f.outcomes.map((x) => [x.pv.name, x.trigger, x.mode, x.result]).sort(), [
    ["pv-1", "restart", "ALWAYS", "HEALED"],
    ["pv-2", "restart", "ALWAYS", "HEALED"],
  ]);

  const none = fake(() => HEALED, {
    caps: { healVolume: false, getVolumeHealth: true },
  });
  const untouched: string[] = [];
  const alone = controllerOf(none, { ...SIDECAR, annotations: first }, async (m) => void untouched.push(m));
  t.after(() => alone.c.close());
  alone.c.lead();
  await waitFor("the sidecar left alone", () => none.notHealing.length === 1);
  assert.deepEqual(untouched, [], "no marker on an object whose driver has not opted in");
  assert.deepEqual(none.calls, []);
  assert.deepEqual(await abnormalSeries(alone.metrics), [], "nor one left alone");
});

test("controller: a driver without VolumeHealer is told once (one report, one series by driver); no periodic pass asks it again, a restart does, and once it heals it is checked again", async (t) => {
  // The periodic timers run on mocked time: ticked past, never waited for.
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const turns = async () => {
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  };
  let offers = false;
  const f = fake(() => HEALED, { caps: () => ({ healVolume: offers, getVolumeHealth: offers }) });
  const ctl = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, { checkIntervalMs: 100, random: () => 0 });
  t.after(() => ctl.c.close());
  ctl.c.lead();
  t.mock.timers.tick(1);
  await waitFor("the first periodic pass to find the driver not healing", () => f.notHealing.length === 1);
  assert.match(f.notHealing[0]!.reason, /does not offer VolumeHealer HEAL_VOLUME/);
  const series = async () => (await ctl.metrics.registry.metrics()).split("\n").filter((l) => l.startsWith("csi_addons_healer_sidecars_not_healing{"));
  assert.deepEqual(await series(), ['csi_addons_healer_sidecars_not_healing{driver="drv"} 1']);
  const asked = f.resolves();
  for (let i = 0; i < 10; i++) {
    t.mock.timers.tick(200);
    await turns();
  }
  assert.equal(f.resolves(), asked, "ten check intervals later: not asked again");
  // A restart (a new driver process may offer it now) is asked: still not healing, not told again.
  ctl.update({ ...HANDLED, [DRIVER_RESTARTED_AT]: "2026-12-05T10:00:00.000Z" });
  await waitFor("the restart pass to ask", () => f.resolves() === asked + 1);
  await turns();
  assert.equal(f.notHealing.length, 1, "the same reason is not told twice");
  // The next driver offers VolumeHealer: its restart is healed, and periodic checks resume.
  offers = true;
  ctl.update({ ...HANDLED, [DRIVER_RESTARTED_AT]: "2026-12-05T11:00:00.000Z" });
  await waitFor("the restart healed", () => f.calls.length === 2);
  await waitFor("healing again: no sidecar left", async () => (await series()).join() === 'csi_addons_healer_sidecars_not_healing{driver="drv"} 0');
  const healed = f.calls.length;
  for (let i = 0; i < 3 && f.calls.length === healed; i++) {
    t.mock.timers.tick(200);
    await turns();
  }
  await waitFor("a periodic check again", () => f.calls.length > healed);
});

test("controller: a restart pass whose volume keeps answering ABORTED completes after maxAttempts: VolumeHealFailed, marker recorded, periodic checks resume", async (t) => {
  const f = fake((pv) => (pv === "pv-1" ? status.ABORTED : HEALED));
  const events: string[][] = [];
  const recorder = {
    volume: (pv: PvInfo, type: string, reason: string) => events.push([pv.name, type, reason]),
  } as unknown as EventRecorder;
  f.deps.reporter = new Reporter(
    createLogger("error", "json"),
    createMetrics(() => ({})),
    recorder,
  );
  const patched: string[] = [];
  const restarted = {
    ...HANDLED,
    [DRIVER_RESTARTED_AT]: "2026-12-03T00:00:00Z",
  };
  const { c } = controllerOf(f, { ...SIDECAR, annotations: restarted }, async (m) => void patched.push(m), { checkIntervalMs: 100, random: () => 0.5 });
  t.after(() => c.close());
  c.lead();
  await waitFor("the restart's marker recorded", () => patched.length === 1, {
    timeoutMs: 5_000,
  });
  assert.deepEqual(patched, ["pod-1+2026-12-03T00:00:00Z"]);
  assert.equal(f.calls.filter((x) => x === "pv-1").length, 3, "maxAttempts");
  assert.deepEqual(
    events.filter(([pv]) => pv === "pv-1"),
    [["pv-1", "Warning", "VolumeHealFailed"]],
  );
  await waitFor("a periodic check of the node", () => f.calls.filter((x) => x === "pv-2").length >= 2, { timeoutMs: 5_000 });
});

test("controller: losing leadership cancels heals in flight; they are not reported; later changes start nothing", async (t) => {
  const f = fake(() => HEALED, { hold: NEVER });
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  const patched: string[] = [];
  const { c, update } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("both heals in flight", () => f.calls.length === 2);
  c.unlead();
  assert.ok(
    f.signals.every((s) => s?.aborted),
    "each call cancelled at once, not left to its deadline",
  );
  await waitFor("both calls ended", () => lines.filter((l) => l["message"] === "heal cancelled").length === 2, { timeoutMs: 5_000 });
  assert.deepEqual(f.outcomes, []);
  assert.deepEqual(patched, []);
  // A standby acts on no change of the objects: the new leader does (two healing at once otherwise).
  const restarts = () => lines.filter((l) => l["message"] === "restart heal").length;
  const before = restarts();
  update({ [CREATED_BY_POD_UID]: "pod-2" });
  await new Promise((r) => setImmediate(r));
  assert.equal(restarts(), before, "no pass started by a replica that no longer leads");
  assert.equal(f.calls.length, 2);
});

test("controller: at shutdown nothing new is sent; calls in flight get the grace to answer (reported), then are cancelled", async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, {
    hold: () => held,
    queue: new WorkQueue({ perNode: 1, global: 1 }),
  });
  const { c } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async () => {});
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("pv-1 in flight, pv-2 waiting for the sidecar's one slot", () => f.calls.length === 1 && f.deps.queue.size === 1);
  const closed = c.close(60_000);
  release();
  await closed;
  assert.deepEqual(f.calls, ["pv-1"], "pv-2 is not sent once shutdown began");
  assert.deepEqual(
    f.outcomes.map((x) => [x.pv.name, x.result]),
    [["pv-1", "HEALED"]],
    "the answer within the grace is reported",
  );

  const stuck = fake(() => HEALED, { hold: NEVER });
  const { lines, logger } = captureLogger("info");
  stuck.deps.logger = logger;
  const s = controllerOf(stuck, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async () => {});
  t.after(() => s.c.close());
  s.c.lead();
  await waitFor("both heals in flight", () => stuck.calls.length === 2);
  const closing = s.c.close(100);
  assert.ok(
    stuck.signals.every((x) => x !== undefined && !x.aborted),
    "not cancelled while the grace lasts",
  );
  await closing;
  assert.ok(
    stuck.signals.every((x) => x?.aborted),
    "cancelled when the grace is over",
  );
  await waitFor("both calls ended", () => lines.filter((l) => l["message"] === "heal cancelled").length === 2, { timeoutMs: 5_000 });
  assert.deepEqual(stuck.outcomes, []);
});

test("controller: a marker write that fails is tried again after its backoff, and given up when this replica stops leading or a newer restart's marker is recorded", async (t) => {
  // The retries' backoff runs on mocked timers: ticked past, never waited for.
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const turn = () => new Promise((r) => setImmediate(r));
  const first = { [CREATED_BY_POD_UID]: "pod-1" };
  const failing = () => {
    const writes: string[] = [];
    const state = { failing: true, waiters: [] as [number, () => void][] };
    const patch = async (m: string) => {
      writes.push(m);
      for (const [n, resolve] of state.waiters) if (writes.length >= n) resolve();
      if (state.failing) throw new KubeRequestError(500, "etcdserver: request timed out");
    };
    const written = (n: number) => within(`marker write ${n}`, new Promise<void>((r) => (writes.length >= n ? r() : state.waiters.push([n, r]))));
    return { writes, state, patch, written };
  };

  const a = failing();
  const standby = controllerOf(
    fake(() => HEALED),
    { ...SIDECAR, annotations: first },
    a.patch,
    { random: () => 0 },
  );
  t.after(() => standby.c.close());
  standby.c.lead();
  await a.written(1);
  await turn(); // the failure handled: the write waits out its backoff
  standby.c.unlead();
  a.state.failing = false;
  t.mock.timers.tick(30_000);
  await turn();
  assert.equal(a.writes.length, 1, "a replica that no longer leads writes no marker");

  const b = failing();
  const leader = controllerOf(
    fake(() => HEALED),
    { ...SIDECAR, annotations: first },
    b.patch,
    { random: () => 0 },
  );
  t.after(() => leader.c.close());
  leader.c.lead();
  await b.written(1);
  await turn();
  b.state.failing = false;
  leader.update({ ...first, [DRIVER_RESTARTED_AT]: "2026-12-04T00:00:00Z" });
  await b.written(2);
  assert.deepEqual(b.writes, ["pod-1+", "pod-1+2026-12-04T00:00:00Z"]);
  t.mock.timers.tick(30_000);
  await turn();
  assert.deepEqual(b.writes, ["pod-1+", "pod-1+2026-12-04T00:00:00Z"], "the older marker is not written over the newer one");

  // A failed write is tried again after the backoff (from 250-500 ms on; the jitter here is 0), not at once.
  const w = failing();
  const again = controllerOf(
    fake(() => HEALED),
    { ...SIDECAR, annotations: first },
    w.patch,
    { random: () => 0 },
  );
  t.after(() => again.c.close());
  again.c.lead();
  await w.written(1);
  // The second wait is twice the first.
  for (const [n, waitMs] of [
    [1, 250],
    [2, 500],
  ] as const) {
    await turn();
    t.mock.timers.tick(waitMs - 1);
    await turn();
    assert.equal(w.writes.length, n, `not before ${waitMs} ms`);
    t.mock.timers.tick(1);
    await w.written(n + 1);
  }
  // Each failure is logged as a warning with its reason and the wait before the next try.
  const warned = again.lines.filter((l) => l["message"] === "could not record the handled restart; retrying");
  assert.deepEqual(
    warned.map((l) => [l["level"], l["sidecar"], l["retryInMs"]]),
    [
      ["warn", SIDECAR.key, 250],
      ["warn", SIDECAR.key, 500],
    ],
  );
  assert.match(String(warned[0]!["error"]), /etcdserver: request timed out/);
});

test("controller: at shutdown a call that answers within the grace with a transient status is final, not tried again, and the pass is not done", async (t) => {
  let release1!: () => void;
  let release2!: () => void;
  const held1 = new Promise<void>((r) => (release1 = r));
  const held2 = new Promise<void>((r) => (release2 = r));
  const gate = gatedSleep();
  const f = fake((pv) => (pv === "pv-1" ? status.UNAVAILABLE : HEALED), {
    hold: (pv) => (pv === "pv-1" ? held1 : held2),
  });
  f.deps.sleep = gate.sleep;
  const { c, lines } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async () => {});
  t.after(() => (release1(), release2(), c.close()));
  c.lead();
  await waitFor("both heals in flight", () => f.calls.length === 2);
  const closing = c.close(60_000);
  release1();
  await waitFor("pv-1's answer reported", () => f.outcomes.length === 1);
  assert.deepEqual(
    f.outcomes.map((x) => [x.pv.name, x.result, x.retryInMs]),
    [["pv-1", "UNAVAILABLE", undefined]],
    "reported as final",
  );
  assert.deepEqual(gate.waits, [], "no retry scheduled once shutdown began");
  // pv-2 answers too, within the grace: the shutdown ends then, not when the 60 s run out.
  release2();
  await closing;
  assert.deepEqual(
    f.outcomes.map((x) => [x.pv.name, x.result]),
    [
      ["pv-1", "UNAVAILABLE"],
      ["pv-2", "HEALED"],
    ],
  );
  assert.deepEqual(f.calls, ["pv-1", "pv-2"]);
  assert.deepEqual(
    lines.filter((l) => l["message"] === "restart heal done"),
    [],
    "a pass stopped by the shutdown is not done, every volume answered or not",
  );
});

test("controller: restart heals cut short on several nodes at once are each healed with ALWAYS when their objects are made again", async (t) => {
  let release!: () => void;
  let held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, {
    hold: () => held,
    queue: new WorkQueue({ perNode: 4, global: 8 }),
  });
  const patched: string[] = [];
  const restarted = {
    ...HANDLED,
    [DRIVER_RESTARTED_AT]: "2026-12-04T10:00:00.000Z",
  };
  const { c, set, remove, lines } = controllerOf(f, { ...SIDECAR, annotations: restarted }, async (m) => void patched.push(m), {
    others: [other(2, restarted), other(3, restarted)],
  });
  t.after(() => (release(), c.close()));
  c.lead();
  await waitFor("the three restart heals in flight", () => f.calls.length === 6);
  // The upstream controller deletes the three objects (it cannot reach the sidecars while their drivers restart).
  for (const key of [SIDECAR.key, "csi/n2", "csi/n3"]) remove(key);
  release();
  held = Promise.resolve();
  const { [HANDLED_RESTART]: _gone, ...recreated } = restarted;
  for (const s of [SIDECAR, other(2), other(3)]) set("add", { ...s, annotations: recreated });
  await waitFor("the three restarts' markers recorded", () => patched.length === 3);
  const passes = lines.filter((l) => l["message"] === "restart heal").map((l) => [l["sidecar"], l["trigger"], l["mode"]]);
  assert.deepEqual(passes.slice(3).sort(), [
    ["csi/n1", "restart", "ALWAYS"],
    ["csi/n2", "restart", "ALWAYS"],
    ["csi/n3", "restart", "ALWAYS"],
  ]);
});

test("controller: a deleted CSIAddonsNode leaves nothing behind: no connection state (even when deleted while its pod's IP was read), no abnormal-volumes series", async (t) => {
  const f = fake(() => ABNORMAL);
  const patched: string[] = [];
  const { c, remove, metrics } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async (m) => void patched.push(m));
  t.after(() => c.close());
  c.lead();
  await waitFor("the first-sight marker recorded", () => patched.length === 1);
  assert.deepEqual(await abnormalSeries(metrics), ['csi_addons_healer_volumes_abnormal{driver="drv",node="n1"} 2']);
  assert.deepEqual(f.deps.pool.countByState(), { ...noStates, serving: 1 });
  remove();
  assert.deepEqual(f.deps.pool.countByState(), noStates);
  assert.deepEqual(await abnormalSeries(metrics), [], "an alert on this node's volumes can clear");

  // A pod:// endpoint whose pod read only ends when the pass's signal aborts.
  const g = fake(() => HEALED);
  let podReads = 0;
  let podReadAborted = false;
  const sidecarPod = (_ns: string, _pod: string, signal: AbortSignal) => {
    podReads++;
    return new Promise<SidecarPod>((_resolve, reject) =>
      signal.addEventListener("abort", () => ((podReadAborted = true), reject(new Error("aborted"))), { once: true }),
    );
  };
  g.deps.pool = new SidecarPool({ sidecarPod }, {}, () => undefined);
  const r = controllerOf(
    g,
    {
      ...SIDECAR,
      endpoint: "pod://plugin.csi:9070",
      annotations: { [CREATED_BY_POD_UID]: "pod-1" },
    },
    async () => {},
  );
  t.after(() => r.c.close());
  r.c.lead();
  await waitFor("the pod's IP being read", () => podReads === 1);
  r.remove();
  await waitFor("the read aborted", () => podReadAborted);
  // The pass handles the aborted read in promise callbacks: all of them have run by the next turn.
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(g.deps.pool.countByState(), noStates);
});

test("controller: a replica that stops leading (unlead(), or close() at shutdown) exports no leader's numbers: no connection states, no abnormal volumes, leader 0; after close() a late lead() starts nothing", async (t) => {
  for (const stop of ["unlead", "close"] as const) {
    const f = fake(() => ABNORMAL);
    const patched: string[] = [];
    const { c, metrics, lines } = controllerOf(f, { ...SIDECAR, annotations: { [CREATED_BY_POD_UID]: "pod-1" } }, async (m) => void patched.push(m));
    t.after(() => c.close());
    const exported = async () => (await metrics.registry.metrics()).split("\n");
    c.lead();
    await waitFor("the first-sight marker recorded", () => patched.length === 1);
    assert.equal((await abnormalSeries(metrics)).length, 1);
    assert.ok((await exported()).includes("csi_addons_healer_leader 1"), "leader 1 while leading");
    if (stop === "unlead") c.unlead();
    else await c.close();
    assert.deepEqual(f.deps.pool.countByState(), noStates, stop);
    assert.deepEqual(await abnormalSeries(metrics), [], stop);
    assert.ok((await exported()).includes('csi_addons_healer_sidecar_connections{state="serving"} 0'), stop);
    assert.ok((await exported()).includes("csi_addons_healer_leader 0"), stop);
    if (stop === "close") {
      // An election callback that comes after the shutdown began.
      c.lead();
      assert.equal(lines.filter((l) => l["message"] === "restart heal").length, 1, "nothing started after close()");
      assert.ok((await exported()).includes("csi_addons_healer_leader 0"));
    }
  }
});

test("controller: at lead, the first periodic checks of the nodes are spread over the interval, not all due within its jitter", async (t) => {
  const f = fake(() => HEALED);
  const { c } = controllerOf(f, { ...SIDECAR, annotations: HANDLED }, async () => {}, {
    checkIntervalMs: 800,
    random: () => 0.5,
    others: [other(2), other(3), other(4)],
  });
  t.after(() => c.close());
  const firstAt = new Map<string, number>();
  const t0 = Date.now();
  c.lead();
  await waitFor(
    "every node's first check",
    () => {
      for (const pv of f.calls) {
        const node = pv.includes("-pv-") ? pv.split("-pv-")[0]! : "n1";
        if (!firstAt.has(node)) firstAt.set(node, Date.now() - t0);
      }
      return firstAt.size === 4;
    },
    { timeoutMs: 5_000, intervalMs: 5 },
  );
  const times = [...firstAt.values()].sort((a, b) => a - b);
  // Due at 100, 300, 500 and 700 ms (the i-th of 4 at (i + 0.5) / 4 of 800 ms); jittered alone, all at 720-880 ms.
  assert.ok(times[3]! - times[0]! >= 400, `first checks at ${times.join(", ")} ms`);
  assert.ok(times[0]! < 400, `the first node checked within half the interval: ${times[0]} ms`);
});
