// heal/pass: one pass over a node's volumes (retry by status class, waiting for the sidecar,
// capability opt-in, cancel and stop), with plain fakes for the sidecar connection.
import { test } from "node:test";
import assert from "node:assert/strict";
import { status } from "@grpc/grpc-js";
import { WorkQueue } from "../../../../controller/heal/queue.js";
import { HealPass, type PassDeps } from "../../../../controller/heal/pass.js";
import { CallError } from "../../../../common/grpc/call-error.js";
import type { PvInfo, SidecarInfo } from "../../../../controller/plan/types.js";
import { waitFor, within } from "../../../support/wait.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { gatedSleep } from "../../../support/gated-sleep.js";
import { delay } from "../../../../common/util/delay.js";
import { KubeRequestError } from "../../../../controller/kube/api.js";
import { SIDECAR, PVS, fake, NEVER, HEALED, run } from "../../../support/heal-fakes.js";

const POD_PV: PvInfo = {
  name: "pv-pod",
  uid: "pv-pod",
  driver: "drv",
  handle: "h-pv-pod",
  deleting: false,
  claim: { namespace: "csi", name: "c", uid: undefined },
};

test("pass: the volumes the node's Pods show are healed too, each once (one already known is not called twice)", async () => {
  const f = fake(() => HEALED);
  const asked: string[] = [];
  f.deps.podVolumes = async (s) => (asked.push(s.nodeId), [POD_PV, PVS[0]!]);
  const sum = await run(f);
  assert.deepEqual(asked, ["n1"], "one list of the node's Pods per pass");
  assert.deepEqual([...sum.answers.keys()].sort(), ["pv-1", "pv-2", "pv-pod"]);
  assert.deepEqual([...f.calls].sort(), ["pv-1", "pv-2", "pv-pod"]);
});

test("pass: a restart pass lists the node's Pods again until it works; refused (403), it heals the rest; a periodic pass goes on without them", async () => {
  const failing = (fails: number, err: () => Error) => {
    let n = 0;
    return async () => {
      if (++n <= fails) throw err();
      return [POD_PV];
    };
  };
  const restart = fake(() => HEALED, { retry: { initialMs: 100, maxMs: 300 } });
  const gate = gatedSleep();
  restart.deps.random = () => 1;
  restart.deps.sleep = gate.sleep;
  let lists = 0;
  const failingList = failing(4, () => new KubeRequestError(0, "list Pods on node n1: connection refused"));
  restart.deps.podVolumes = () => (lists++, failingList());
  const done = run(restart);
  for (let i = 1; i <= 4; i++) {
    await waitFor(`wait ${i}`, () => gate.waits.length === i);
    assert.equal(lists, i, "no list again before the wait is over");
    gate.wake();
  }
  assert.deepEqual([...(await done).answers.keys()].sort(), ["pv-1", "pv-2", "pv-pod"], "retried until the list worked: no heal lost");
  assert.deepEqual(gate.waits, [100, 200, 300, 300], "after a backoff each time, up to its cap");

  const logger = captureLogger();
  const refused = fake(() => HEALED);
  refused.deps.logger = logger.logger;
  refused.deps.podVolumes = failing(1, () => new KubeRequestError(403, "list Pods on node n1: HTTP 403"));
  assert.deepEqual([...(await run(refused)).answers.keys()].sort(), ["pv-1", "pv-2"], "not asked again: the permission will not come by waiting");
  assert.ok(logger.lines.some((l) => l.message === "could not list the Pods on the sidecar's node" && String(l.error).includes("403")));

  const periodic = fake(() => HEALED);
  periodic.deps.podVolumes = failing(1, () => new KubeRequestError(0, "list Pods on node n1: connection refused"));
  assert.deepEqual([...(await run(periodic, "periodic")).answers.keys()].sort(), ["pv-1", "pv-2"], "the next periodic pass tries again");
});

test("pass: over no volumes it completes at once, nothing called; over one it heals that one", async () => {
  for (const pvs of [[], [PVS[0]!]]) {
    const f = fake(() => HEALED);
    const pass = new HealPass(f.deps, { sidecar: SIDECAR, pvs, mode: "ALWAYS", trigger: "restart", generation: 1, priority: 0 });
    const sum = await within("the pass to end", pass.start().done);
    assert.equal(sum.completed, true, `${pvs.length} volume(s): completed (a restart's marker is written only then)`);
    assert.deepEqual(
      f.calls,
      pvs.map((pv) => pv.name),
    );
    assert.deepEqual(
      [...sum.answers.keys()],
      pvs.map((pv) => pv.name),
    );
  }
});

test("pass: transient statuses are retried until answered; the answer is final", async () => {
  const f = fake((pv, n) => (pv === "pv-1" && n <= 2 ? (n === 1 ? status.UNAVAILABLE : status.ABORTED) : HEALED));
  const sum = await run(f, "periodic");
  assert.deepEqual([...sum.answers].sort(), [
    ["pv-1", "HEALED"],
    ["pv-2", "HEALED"],
  ]);
  assert.equal(f.calls.filter((c) => c === "pv-1").length, 3);
  assert.deepEqual(
    f.outcomes.filter((x) => x.pv.name === "pv-1").map((x) => [x.attempt, x.result, x.retryInMs !== undefined]),
    [
      [1, "UNAVAILABLE", true],
      [2, "ABORTED", true],
      [3, "HEALED", false],
    ],
  );
});

test("pass: refusals and bad requests are not retried; each is reported, and none counts as an abnormal volume", async () => {
  for (const code of [status.NOT_FOUND, status.FAILED_PRECONDITION, status.PERMISSION_DENIED, status.INVALID_ARGUMENT]) {
    const f = fake((pv) => (pv === "pv-1" ? code : HEALED));
    const sum = await run(f);
    assert.equal(sum.answers.get("pv-1"), status[code]);
    assert.equal(f.calls.filter((c) => c === "pv-1").length, 1, status[code]);
    assert.deepEqual(
      f.outcomes.filter((x) => x.pv.name === "pv-1").map((x) => [x.attempt, x.result, x.retryInMs]),
      [[1, status[code], undefined]],
    );
    assert.equal(sum.abnormal, 0, `${status[code]}: a failed heal says nothing about the volume's health`);
  }
});

test("pass: each outcome carries the call's own duration, answered or failed", async () => {
  const started = Date.now();
  const f = fake((pv) => (pv === "pv-1" ? HEALED : status.NOT_FOUND));
  await run(f);
  const elapsed = Date.now() - started;
  assert.deepEqual(f.outcomes.map((x) => x.result).sort(), ["HEALED", "NOT_FOUND"]);
  for (const x of f.outcomes)
    assert.ok(x.durationMs >= 0 && x.durationMs <= elapsed, `${x.result}: durationMs ${x.durationMs} of a pass that took ${elapsed} ms`);
});

test("pass: UNAVAILABLE looks the sidecar up again (it may have moved); other transient answers keep the connection", async () => {
  const moved = fake((pv, n) => (pv === "pv-1" && n === 1 ? status.UNAVAILABLE : HEALED));
  await run(moved, "periodic");
  assert.equal(moved.resolves(), 2);
  const busy = fake((pv, n) => (pv === "pv-1" && n === 1 ? status.ABORTED : HEALED));
  await run(busy, "periodic");
  assert.equal(busy.resolves(), 1);
});

test("pass: a sidecar that is not SERVING yet is asked again after the backoff, not at once", async () => {
  const probes: number[] = [];
  const f = fake(() => HEALED, {
    serving: () => probes.push(Date.now()) > 2,
    retry: { initialMs: 100, maxMs: 100 },
  });
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  await run(f);
  assert.equal(probes.length, 3);
  assert.deepEqual(
    lines.filter((l) => l["message"] === "waiting for sidecar").map((l) => [l["sidecar"], l["attempt"], l["reason"]]),
    [
      [SIDECAR.key, 1, "NOT_SERVING at fake"],
      [SIDECAR.key, 2, "NOT_SERVING at fake"],
    ],
    "each wait is logged with its reason",
  );
  // Backoff with jitter waits between half and all of 100 ms.
  for (let i = 1; i < probes.length; i++)
    assert.ok(probes[i]! - probes[i - 1]! >= 45, `probe ${i + 1} came ${probes[i]! - probes[i - 1]!} ms after the one before`);
});

test("pass: a periodic pass gives up after maxAttempts; a restart pass waits for a sidecar that is down or busy however long it takes", async () => {
  const periodic = fake(() => status.UNAVAILABLE);
  const p = await run(periodic, "periodic");
  assert.equal(p.answers.get("pv-1"), "UNAVAILABLE");
  assert.equal(periodic.calls.filter((c) => c === "pv-1").length, 3);
  assert.deepEqual(
    periodic.outcomes.filter((x) => x.pv.name === "pv-1").map((x) => [x.attempt, x.retryInMs !== undefined]),
    [
      [1, true],
      [2, true],
      [3, false],
    ],
    "the last attempt reported too, as final",
  );
  assert.equal(p.abnormal, 0, "a volume whose sidecar never answered is not counted abnormal");

  const down = [status.ABORTED, status.UNAVAILABLE, status.UNAVAILABLE, status.ABORTED, status.RESOURCE_EXHAUSTED];
  const restart = fake((pv, n) => (pv === "pv-1" ? (n <= 7 ? [status.UNAVAILABLE, status.RESOURCE_EXHAUSTED][n % 2]! : HEALED) : (down[n - 1] ?? HEALED)));
  const r = await run(restart);
  assert.equal(r.answers.get("pv-1"), "HEALED");
  assert.equal(restart.calls.filter((c) => c === "pv-1").length, 8, "past maxAttempts (3), after waiting for the sidecar again");
  assert.equal(r.answers.get("pv-2"), "HEALED", "only the volume's own failures (2 ABORTED) count against maxAttempts, not the sidecar being down");
  assert.equal(restart.calls.filter((c) => c === "pv-2").length, 6);
});

test("pass: a restart pass waiting for a busy sidecar backs off in rounds of maxAttempts, looking the sidecar up again after each round", async () => {
  const f = fake((pv, n) => (pv === "pv-1" && n <= 7 ? status.RESOURCE_EXHAUSTED : HEALED), { retry: { initialMs: 8, maxMs: 1000 } });
  f.deps.random = () => 0; // each wait is the lower end of its band: 4, 8, 16 ms
  const r = await run(f);
  assert.equal(r.answers.get("pv-1"), "HEALED");
  const waits = f.outcomes.filter((x) => x.pv.name === "pv-1" && x.retryInMs !== undefined).map((x) => [x.attempt, x.retryInMs]);
  assert.deepEqual(waits, [
    [1, 4],
    [2, 8],
    [3, 16],
    [4, 4],
    [5, 8],
    [6, 16],
    [7, 4],
  ]);
  assert.equal(f.resolves(), 3, "the first lookup, then one after the 3rd and the 6th attempt");
});

test("pass: a restart pass gives a volume that keeps failing up after maxAttempts, reported as final, so the pass completes", async (t) => {
  const f = fake((pv) => (pv === "pv-1" ? status.ABORTED : status.DEADLINE_EXCEEDED));
  const pass = new HealPass(f.deps, {
    sidecar: SIDECAR,
    pvs: PVS,
    mode: "ALWAYS",
    trigger: "restart",
    generation: 1,
    priority: 0,
  }).start();
  t.after(() => pass.cancel());
  let sum: Awaited<typeof pass.done> | undefined;
  void pass.done.then((s) => (sum = s));
  await waitFor("the restart pass to complete", () => sum, {
    timeoutMs: 5_000,
  });
  assert.equal(sum!.completed, true);
  assert.deepEqual([...sum!.answers].sort(), [
    ["pv-1", "ABORTED"],
    ["pv-2", "DEADLINE_EXCEEDED"],
  ]);
  assert.deepEqual(
    f.outcomes.filter((x) => x.pv.name === "pv-1").map((x) => [x.attempt, x.result, x.retryInMs !== undefined]),
    [
      [1, "ABORTED", true],
      [2, "ABORTED", true],
      [3, "ABORTED", false],
    ],
    "the last attempt reported as final",
  );
  assert.equal(f.calls.filter((c) => c === "pv-2").length, 3);
});

test("pass: cancel() cancels its heals in flight; a cancelled call is logged, not reported as a failure", async () => {
  const f = fake(() => HEALED, { hold: NEVER });
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  const pass = new HealPass(f.deps, {
    sidecar: SIDECAR,
    pvs: PVS,
    mode: "ALWAYS",
    trigger: "restart",
    generation: 1,
    priority: 0,
  }).start();
  await waitFor("both heals in flight", () => f.calls.length === 2);
  pass.cancel();
  assert.equal((await within("the pass to end", pass.done)).completed, false);
  assert.ok(
    f.signals.every((s) => s?.aborted),
    "each call's signal aborted",
  );
  await waitFor("both calls ended", () => lines.filter((l) => l["message"] === "heal cancelled").length === 2, { timeoutMs: 5_000 });
  assert.deepEqual(f.outcomes, [], "no answer to report: no failure, no metric, no Event");
  assert.deepEqual(
    lines
      .filter((l) => l["message"] === "heal cancelled")
      .map((l) => [l["pv"], l["result"], l["trigger"]])
      .sort(),
    [
      ["pv-1", "CANCELLED", "restart"],
      ["pv-2", "CANCELLED", "restart"],
    ],
  );
});

test("pass: stop() fixes the summary: a call answering afterwards is reported, but neither added to it nor passed on as an answer", async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const f = fake(() => HEALED, {
    hold: (pv) => (pv === "pv-2" ? held : Promise.resolve()),
  });
  const answered: string[] = [];
  const pass = new HealPass(
    f.deps,
    {
      sidecar: SIDECAR,
      pvs: PVS,
      mode: "ALWAYS",
      trigger: "restart",
      generation: 1,
      priority: 0,
    },
    (pv) => void answered.push(pv),
  ).start();
  await waitFor("pv-1 answered, pv-2 in flight", () => answered.length === 1 && f.calls.length === 2);
  pass.stop();
  const sum = await within("the pass to end", pass.done);
  release();
  await waitFor("pv-2's answer reported", () => f.outcomes.length === 2);
  assert.deepEqual([sum.completed, [...sum.answers.keys()], answered], [false, ["pv-1"], ["pv-1"]]);
});

test("pass: a sidecar no longer in the cluster ends the pass at once, not completed, nothing called (the heal subcommand would wait out its deadline)", async () => {
  const f = fake(() => HEALED);
  f.deps.latest = () => undefined;
  const sum = await run(f);
  assert.equal(sum.completed, false);
  assert.deepEqual([f.calls, f.resolves()], [[], 0]);
});

test("pass: waits until the sidecar is SERVING before the first call", async () => {
  let checks = 0;
  const f = fake(() => HEALED, { serving: () => ++checks >= 3 });
  const sum = await run(f);
  assert.equal(sum.completed, true);
  assert.ok(checks >= 3);
  assert.equal(f.calls.length, 2);
});

test("pass: a driver without HEAL_VOLUME (or GET_VOLUME_HEALTH for checks) is never called", async () => {
  const noHeal = fake(() => HEALED, {
    caps: { healVolume: false, getVolumeHealth: true },
  });
  assert.match((await run(noHeal)).skipped ?? "", /HEAL_VOLUME/);
  const noCheck = fake(() => HEALED, {
    caps: { healVolume: true, getVolumeHealth: false },
  });
  assert.match((await run(noCheck, "periodic")).skipped ?? "", /GET_VOLUME_HEALTH/);
  assert.equal(noHeal.calls.length + noCheck.calls.length, 0);
});

test("pass: cancelled (superseded) → not completed, nothing more is called", async () => {
  const f = fake(() => status.UNAVAILABLE);
  const pass = new HealPass(f.deps, {
    sidecar: SIDECAR,
    pvs: PVS,
    mode: "ALWAYS",
    trigger: "restart",
    generation: 1,
    priority: 0,
  }).start();
  await waitFor("a first call", () => f.calls.length >= 1);
  pass.cancel();
  const sum = await within("the pass to end", pass.done);
  assert.equal(sum.completed, false);
  const n = f.calls.length;
  await new Promise((r) => setTimeout(r, 50)); // retries were due within 5 ms: none may come
  assert.equal(f.calls.length, n);
});

test("pass: cancelled while waiting for its sidecar → that wait is interrupted at once, not left to run out", async () => {
  const f = fake(() => HEALED);
  const waits: AbortSignal[] = [];
  // A sidecar whose endpoint takes forever to resolve: only the pass's own signal ends the wait.
  f.deps.pool = {
    resolve: (_s: SidecarInfo, signal: AbortSignal) => {
      waits.push(signal);
      return new Promise((_resolve, reject) =>
        signal.addEventListener("abort", () => reject(new Error("aborted")), {
          once: true,
        }),
      );
    },
    setState: () => {},
  } as unknown as PassDeps["pool"];
  const pass = new HealPass(f.deps, {
    sidecar: SIDECAR,
    pvs: PVS,
    mode: "ALWAYS",
    trigger: "restart",
    generation: 1,
    priority: 0,
  }).start();
  await waitFor("the pass to wait for its sidecar", () => waits.length === 1);
  pass.cancel();
  assert.equal(waits[0]!.aborted, true, "the wait for the sidecar is aborted by cancel()");
  assert.equal((await within("the pass to end", pass.done)).completed, false);
  assert.equal(f.calls.length, 0);
});

test("pass: a volume whose sidecar is being found again waits for it outside the queue: queued again once, when it is found", async () => {
  let probes = 0;
  // SERVING for the first call, then not for three probes after its UNAVAILABLE (the sidecar restarting).
  const f = fake((pv, n) => (pv === "pv-1" && n === 1 ? status.UNAVAILABLE : HEALED), { serving: () => ++probes === 1 || probes > 4 });
  let queued = 0;
  const add = f.deps.queue.add.bind(f.deps.queue);
  f.deps.queue.add = (item) => (queued++, add(item));
  const sum = await run(f, "periodic");
  assert.deepEqual([...sum.answers].sort(), [
    ["pv-1", "HEALED"],
    ["pv-2", "HEALED"],
  ]);
  assert.equal(probes, 5, "found again after three probes that said not SERVING");
  assert.equal(queued, 3, "pv-1 and pv-2, then pv-1 once more: no turns through the queue while its sidecar was looked up");
});

test("pass: volumes that find their sidecar being looked up again join that lookup: one lookup, not one per volume", async () => {
  let probes = 0;
  let up = false;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  // One call at a time: pv-1 fails UNAVAILABLE (the sidecar is looked up again), pv-2 is in flight
  // meanwhile, and pv-3 comes to its turn while the lookup lasts.
  const f = fake((pv, n) => (pv === "pv-1" && n === 1 ? status.UNAVAILABLE : HEALED), {
    serving: () => ++probes === 1 || up,
    hold: (pv) => (pv === "pv-2" ? held : Promise.resolve()),
    queue: new WorkQueue({ perNode: 1, global: 1 }),
  });
  const waits: number[] = [];
  f.deps.sleep = (ms, signal) => (waits.push(ms), delay(ms, signal));
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  const pvs = ["pv-1", "pv-2", "pv-3"].map((name) => ({
    ...PVS[0]!,
    name,
    uid: name,
    handle: `h-${name}`,
  }));
  const pass = new HealPass(f.deps, {
    sidecar: SIDECAR,
    pvs,
    mode: "IF_ABNORMAL",
    trigger: "periodic",
    generation: 1,
    priority: 0,
  }).start();
  await waitFor("the sidecar being looked up again", () => probes >= 2);
  release();
  await waitFor("pv-3 waiting for that lookup", () => waits.includes(0));
  up = true;
  const sum = await within("the pass to end", pass.done);
  assert.deepEqual([...sum.answers].sort(), [
    ["pv-1", "HEALED"],
    ["pv-2", "HEALED"],
    ["pv-3", "HEALED"],
  ]);
  // Each lookup counts its own attempts from 1: one lookup logs 1, 2, 3, …; a second would start at 1 again.
  const attempts = lines.filter((l) => l["message"] === "waiting for sidecar").map((l) => l["attempt"] as number);
  assert.ok(attempts.length >= 2, `waited: ${attempts.join(", ")}`);
  assert.deepEqual(
    attempts,
    attempts.map((_, i) => i + 1),
    "one lookup after UNAVAILABLE, joined by pv-3",
  );
});

test("pass: a sidecar that says SERVING but fails to tell its capabilities is counted as failing, asked again after the backoff, then healed", async () => {
  let asked = 0;
  let stateWhenAskedAgain: Record<string, number> | undefined;
  const f = fake(() => HEALED, {
    caps: () => {
      if (++asked === 1) throw new CallError(status.UNAVAILABLE, "connection reset");
      stateWhenAskedAgain = f.deps.pool.countByState();
      return { healVolume: true, getVolumeHealth: true };
    },
  });
  const { lines, logger } = captureLogger("info");
  f.deps.logger = logger;
  const pass = new HealPass(f.deps, {
    sidecar: SIDECAR,
    pvs: PVS,
    mode: "ALWAYS",
    trigger: "restart",
    generation: 1,
    priority: 0,
  }).start();
  let sum: Awaited<typeof pass.done> | undefined;
  void pass.done.then((x) => (sum = x));
  await waitFor("the pass to complete", () => sum, { timeoutMs: 5_000 });
  assert.deepEqual([...sum!.answers].sort(), [
    ["pv-1", "HEALED"],
    ["pv-2", "HEALED"],
  ]);
  assert.equal(f.resolves(), 2);
  assert.deepEqual(
    stateWhenAskedAgain,
    { serving: 0, not_serving: 0, unreachable: 0, failing: 1, unresolved: 0, refused: 0 },
    "neither unresolved (it was found) nor not_serving (it said SERVING)",
  );
  assert.deepEqual(f.deps.pool.countByState(), {
    serving: 1,
    not_serving: 0,
    unreachable: 0,
    failing: 0,
    unresolved: 0,
    refused: 0,
  });
  assert.deepEqual(
    lines.filter((l) => l["message"] === "waiting for sidecar").map((l) => l["reason"]),
    ["SERVING at fake, but GetCapabilities failed: UNAVAILABLE: connection reset"],
  );
});
