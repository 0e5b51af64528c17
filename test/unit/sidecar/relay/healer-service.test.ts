// relay/healer-service in process, over fakes of the driver connection and the Kubernetes reads:
// the decisions the process tests reach only by chance of timing — which driver may be called,
// and what a caller gets when it joined a shared driver call that another caller started.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { createHealerService } from "../../../../sidecar/relay/healer-service.js";
import { Limiter } from "../../../../sidecar/relay/limiter.js";
import type { ResolverDeps } from "../../../../sidecar/relay/resolve.js";
import type { DriverConnection, DriverInfo } from "../../../../sidecar/driver/connection.js";
import { DomainError } from "../../../../sidecar/errors.js";
import { CallError } from "../../../../common/grpc/call-error.js";
import type { CallContext } from "../../../../sidecar/server/context.js";
import { toStatus } from "../../../../sidecar/server/status.js";
import type { PersistentVolume, VolumeAttachment } from "../../../../sidecar/kube/api.js";
import { HealVolumeRequest_Mode as Mode } from "../../../../proto/gen/sidecar/v1/healer.js";
import {
  HealReason,
  MountPropagation as Propagation,
  NodeHealVolumeResponse_Result as Result,
  TargetResult_State as TargetState,
  VolumeHealth_State as State,
  type NodeHealVolumeRequest,
} from "../../../../proto/gen/healer/v1/healer.js";
import { createLogger } from "../../../../common/log/logger.js";
import { waitFor } from "../../../support/wait.js";
import { reasonFor } from "../../../support/heal-request.js";

const DRIVER = "drv.example.com";
const driverInfo = (caps: Partial<Pick<DriverInfo, "getVolumeHealth" | "healVolume">> = {}): DriverInfo => ({
  name: DRIVER,
  vendorVersion: "1",
  manifest: {},
  capabilities: [],
  nodeService: true,
  controllerService: false,
  getVolumeHealth: true,
  healVolume: true,
  ...caps,
});

type DriverCall = { method: string; deadline: number; signal: AbortSignal | undefined; req: unknown };

/** A driver connection whose answers the test decides, call by call (`answer`), and whose calls it counts. */
function fakeDriver(info: DriverInfo | undefined, ready = true) {
  const calls: DriverCall[] = [];
  let answer: (c: DriverCall, n: number) => Promise<unknown> = async (c) =>
    c.method.endsWith("NodeGetVolumeHealth")
      ? { health: { state: State.HEALTHY } }
      : { result: Result.HEALED, health: { state: State.HEALTHY }, message: "", targets: [] };
  const driver = {
    ready,
    driver: info,
    call: (def: { path: string }, req: unknown, deadline: number, signal?: AbortSignal) => {
      const c = { method: def.path, deadline, signal, req };
      calls.push(c);
      return answer(c, calls.length);
    },
  } as unknown as DriverConnection;
  return { driver, calls, answerWith: (f: typeof answer) => void (answer = f) };
}

/** The Kubernetes side: one RWO PV attached to this node (bound to `claimRef` when given); counts the reads. */
function fakeResolver(claimRef?: { namespace: string; name: string }) {
  const reads: string[] = [];
  const pv: PersistentVolume = {
    metadata: { name: "pv-a" },
    spec: { accessModes: ["ReadWriteOnce"], csi: { driver: DRIVER, volumeHandle: "vol-a" }, ...(claimRef ? { claimRef } : {}) },
  } as PersistentVolume;
  const va = { metadata: { name: "va" }, spec: {}, status: { attached: true } } as VolumeAttachment;
  const deps = {
    nodeName: "node-1",
    stagingRoot: "/staging/",
    pvs: { get: async (name: string) => (reads.push(`pv ${name}`), name === "pv-a" ? pv : undefined) },
    nodes: { get: async () => (reads.push("node"), { metadata: { name: "node-1" }, status: {} }) },
    kube: { getVolumeAttachment: async () => (reads.push("va"), va) },
    secrets: { get: async () => (reads.push("secret"), {}) },
  } as unknown as ResolverDeps;
  return { deps, reads };
}

/** As the server makes it: the call's signal fires at its deadline. */
/**
 * The caller's signal ends at its deadline with a DeadlineExceeded, as the service's own deadline
 * timer does: which of the two fires first (under load, either can) does not change the answer.
 */
function deadlineSignal(deadline: number): AbortSignal {
  const c = new AbortController();
  setTimeout(() => c.abort(new DomainError("DeadlineExceeded", "deadline exceeded")), Math.max(0, deadline - Date.now())).unref();
  return c.signal;
}

function context(deadline: number, signal: AbortSignal = deadlineSignal(deadline)): CallContext {
  return {
    method: "/sidecar.v1.VolumeHealer/HealVolume",
    metadata: new grpc.Metadata(),
    peer: "test",
    deadline,
    signal,
    fields: {},
    logger: createLogger("error", "json"),
  };
}

const kindOf = (p: Promise<unknown>) =>
  p.then(
    () => "OK",
    (e: unknown) => (e instanceof DomainError ? e.kind : `not a DomainError: ${String(e)}`),
  );

test("a driver connected once but not ready now is refused UNAVAILABLE before any Kubernetes read or driver call", async () => {
  for (const [what, d] of [
    ["not ready, its identity still known", fakeDriver(driverInfo(), false)],
    ["ready but no identity yet", fakeDriver(undefined, true)],
  ] as const) {
    const k = fakeResolver();
    const service = createHealerService({ driver: d.driver, resolver: k.deps, limiter: new Limiter(4, 4) });
    assert.equal(
      await kindOf(service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 5_000))),
      "Unavailable",
      what,
    );
    assert.equal(await kindOf(service.getVolumeHealth({ pvName: "pv-a" }, context(Date.now() + 5_000))), "Unavailable", what);
    assert.deepEqual(k.reads, [], `${what}: no Kubernetes read`);
    assert.equal(d.calls.length, 0, `${what}: no driver call`);
  }
});

test("a driver that can heal but not check health: ALWAYS heals; IF_ABNORMAL is UNIMPLEMENTED, saying why, without a driver call", async () => {
  const d = fakeDriver(driverInfo({ getVolumeHealth: false }));
  const k = fakeResolver();
  const service = createHealerService({ driver: d.driver, resolver: k.deps, limiter: new Limiter(4, 4) });
  const healed = await service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 5_000));
  assert.equal(healed.result, Result.HEALED);
  assert.deepEqual(
    d.calls.map((c) => c.method),
    ["/healer.v1.VolumeHealerNode/NodeHealVolume"],
  );
  await assert.rejects(
    service.healVolume({ pvName: "pv-a", mode: Mode.IF_ABNORMAL, reason: reasonFor(Mode.IF_ABNORMAL) }, context(Date.now() + 5_000)),
    (e: DomainError) => {
      assert.equal(e.kind, "Unimplemented");
      assert.match(e.message, /cannot check health, so IF_ABNORMAL is not possible; use ALWAYS/);
      return true;
    },
  );
  assert.equal(d.calls.length, 1, "IF_ABNORMAL reached no driver call");
});

test("a caller that joined a shared call started on an earlier deadline gets the driver's own failure when it came in time: no second driver call", async () => {
  const d = fakeDriver(driverInfo());
  let fail!: () => void;
  d.answerWith(() => new Promise((_, reject) => (fail = () => reject(new DomainError("Internal", "the driver says no")))));
  const service = createHealerService({ driver: d.driver, resolver: fakeResolver().deps, limiter: new Limiter(4, 4) });
  // Deadlines far enough for the answer, near enough that a second driver call (which would wait
  // for the joiner's deadline) fails the test in seconds rather than hanging it.
  const starter = kindOf(service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 1_500)));
  await waitFor("the driver call", () => d.calls.length === 1);
  const joiner = kindOf(service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 3_000)));
  fail();
  assert.equal(await starter, "Internal");
  assert.equal(await joiner, "Internal", "the joiner's time is not up, but the failure is the driver's, not the starter's deadline");
  assert.equal(d.calls.length, 1);
});

test("a joiner whose starter's shorter deadline ran out runs the call again on its own time, even when an abandoned earlier call of the same volume ends meanwhile", async () => {
  const d = fakeDriver(driverInfo());
  let finishAbandoned!: () => void;
  d.answerWith((c, n) => {
    // 1: abandoned by its only caller, but the driver finishes it later anyway.
    if (n === 1) return new Promise((resolve) => (finishAbandoned = () => resolve({ result: Result.HEALED, message: "" })));
    // 2: runs on the starter's short deadline: ends with it.
    if (n === 2)
      return new Promise((_, reject) =>
        c.signal!.addEventListener("abort", () => reject(new DomainError("DeadlineExceeded", "driver call timed out")), { once: true }),
      );
    return Promise.resolve({ result: Result.HEALED, health: { state: State.HEALTHY }, message: "third", targets: [] });
  });
  const limiter = new Limiter(4, 4);
  const service = createHealerService({ driver: d.driver, resolver: fakeResolver().deps, limiter });

  const leaving = new AbortController();
  const first = kindOf(service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 20_000, leaving.signal)));
  await waitFor("the first driver call", () => d.calls.length === 1);
  leaving.abort();
  assert.equal(await first, "Cancelled");

  const starter = kindOf(service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 400)));
  await waitFor("the second driver call", () => d.calls.length === 2);
  // The abandoned call ends while the second one runs: it must not take the running one's deadline with it.
  finishAbandoned();
  await waitFor("the abandoned call's slot freed", () => limiter.inflight === 1);
  const joiner = service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 30_000));
  assert.equal(await starter, "DeadlineExceeded");
  const answer = await joiner;
  assert.equal(answer.message, "third", "the joiner's heal ran again, on its own deadline");
  assert.equal(d.calls.length, 3);
});

test("a joiner whose starter's deadline ran out runs the call again even when that deadline's timer fired a little before the clock reached it", async () => {
  // Node's timers run on the event loop's cached clock: under load, a driver call's timer (ours
  // or the driver's, from grpc-timeout) can end the call a few ms before Date.now() reaches its
  // deadline. That is still the starter's time running out, not a failure of the driver's own.
  for (const timedOut of [
    new CallError(grpc.status.DEADLINE_EXCEEDED, "deadline of 300 ms exceeded"),
    new DomainError("DeadlineExceeded", "driver call timed out"),
  ]) {
    const d = fakeDriver(driverInfo());
    const starterDeadline = Date.now() + 300;
    d.answerWith((_c, n) =>
      n === 1
        ? new Promise((_, reject) => setTimeout(() => reject(timedOut), Math.max(0, starterDeadline - 20 - Date.now())))
        : Promise.resolve({ result: Result.HEALED, health: { state: State.HEALTHY }, message: "on the joiner's time", targets: [] }),
    );
    const service = createHealerService({ driver: d.driver, resolver: fakeResolver().deps, limiter: new Limiter(4, 4) });
    const starter = service
      .healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(starterDeadline))
      .catch((e: unknown) => e);
    await waitFor("the driver call", () => d.calls.length === 1);
    const joiner = await service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 5_000));
    assert.equal(joiner.message, "on the joiner's time", timedOut.name);
    assert.equal(d.calls.length, 2, "a second driver call, on the joiner's deadline");
    // The starter's own time was up: DEADLINE_EXCEEDED, the driver's, or ours when the driver's
    // answer came after the deadline (its timer fired late: CI's load did that once).
    assert.equal(toStatus(await starter).code, grpc.status.DEADLINE_EXCEEDED);
  }
});

// setTimeout is mocked, so waitFor cannot be used: the test's own timeout bounds the wait instead.
test(
  "a joiner gets its own driver call also when the starter's deadline timer cut the shared call before the clock reached the deadline (the cut driver call answers CANCELLED)",
  { timeout: 10_000 },
  async (t) => {
    // setTimeout alone is mocked: ticking it fires the shared call's deadline timer while Date.now()
    // is still far from that deadline, as an event loop's stale clock can under load.
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const d = fakeDriver(driverInfo());
    d.answerWith((c, n) =>
      n === 1
        ? new Promise((_, reject) => c.signal!.addEventListener("abort", () => reject(new CallError(grpc.status.CANCELLED, "call cancelled")), { once: true }))
        : Promise.resolve({ result: Result.HEALED, health: { state: State.HEALTHY }, message: "on the joiner's time", targets: [] }),
    );
    const service = createHealerService({ driver: d.driver, resolver: fakeResolver().deps, limiter: new Limiter(4, 4) });
    const never = () => new AbortController().signal;
    const starter = service
      .healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 60_000, never()))
      .catch((e: unknown) => e);
    while (d.calls.length < 1) await new Promise(setImmediate);
    // Joins at once: serve() reaches the single flight before its first await.
    const joiner = service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, context(Date.now() + 120_000, never()));
    t.mock.timers.tick(60_001);
    assert.equal((await joiner).message, "on the joiner's time");
    assert.equal(d.calls.length, 2, "a second driver call, on the joiner's deadline");
    assert.ok((await starter) instanceof CallError, "the starter's own call was cut: its answer is the driver call's");
  },
);

test("a heal without a mode or a reason (0: the field left out) or with one it does not know is INVALID_ARGUMENT naming the field, before any read or driver call", async () => {
  const d = fakeDriver(driverInfo());
  const k = fakeResolver();
  const service = createHealerService({ driver: d.driver, resolver: k.deps, limiter: new Limiter(4, 4) });
  for (const [req, field] of [
    [{ mode: Mode.MODE_UNSPECIFIED, reason: HealReason.DRIVER_RESTARTED }, /^mode 0 is not a HealVolume mode \(required: ALWAYS = 1 or IF_ABNORMAL = 2\)$/],
    [{ mode: 7 as Mode, reason: HealReason.DRIVER_RESTARTED }, /^mode 7 is not/],
    [
      { mode: Mode.ALWAYS, reason: HealReason.HEAL_REASON_UNSPECIFIED },
      /^reason 0 is not a heal reason \(required: DRIVER_RESTARTED = 1, VOLUME_ABNORMAL = 2 or OPERATOR_REQUEST = 3\)$/,
    ],
    [{ mode: Mode.ALWAYS, reason: 9 as HealReason }, /^reason 9 is not/],
  ] as const) {
    assert.throws(
      () => service.healVolume({ pvName: "pv-a", ...req }, context(Date.now() + 5_000)),
      (e: DomainError) => e.kind === "InvalidArgument" && field.test(e.message),
    );
  }
  assert.deepEqual(k.reads, []);
  assert.equal(d.calls.length, 0);
});

test("the driver is told the reason and one target per pod on the node that uses the volume, at the kubelet's path; the caller gets each pod's answer", async () => {
  const d = fakeDriver(driverInfo());
  const k = fakeResolver({ namespace: "apps", name: "data" });
  const [uidA, uidB] = ["0b7ac1f2-5c3e-4f7a-9d2e-3a4b5c6d7e8f", "1c8bd2a3-6d4f-4a8b-8e3f-4b5c6d7e8f90"];
  const asked: string[] = [];
  const deps = {
    ...k.deps,
    stagingRoot: "/var/lib/kubelet/plugins/kubernetes.io/csi/",
    attach: { required: async () => true, skipsAttach: () => false },
    pods: {
      uses: async () => true,
      usersOf: async (ns: string, name: string) => (
        asked.push(`${ns}/${name}`),
        [
          { namespace: "apps", name: "a", uid: uidA, readOnly: false, propagation: "None" as const },
          { namespace: "apps", name: "b", uid: uidB, readOnly: true, propagation: "HostToContainer" as const },
          // No API server makes such a UID: it names no path, so no target.
          { namespace: "apps", name: "c", uid: "../../etc", readOnly: false, propagation: "None" as const },
        ]
      ),
    },
  } as unknown as ResolverDeps;
  const pathA = `/var/lib/kubelet/pods/${uidA}/volumes/kubernetes.io~csi/pv-a/mount`;
  const pathB = `/var/lib/kubelet/pods/${uidB}/volumes/kubernetes.io~csi/pv-a/mount`;
  d.answerWith(async () => ({
    result: Result.HEALED,
    health: { state: State.HEALTHY },
    message: "",
    targets: [
      { targetPath: pathA, state: TargetState.RESTART_NEEDED, reason: "StaleFuseMount", message: "dead" },
      { targetPath: "/somewhere/else", state: TargetState.WHOLE_IN_PLACE, reason: "", message: "" },
    ],
  }));
  const service = createHealerService({ driver: d.driver, resolver: deps, limiter: new Limiter(4, 4) });
  const res = await service.healVolume({ pvName: "pv-a", mode: Mode.ALWAYS, reason: HealReason.OPERATOR_REQUEST }, context(Date.now() + 5_000));
  assert.deepEqual(asked, ["apps/data"]);
  const sent = d.calls[0]!.req as NodeHealVolumeRequest;
  assert.equal(sent.reason, HealReason.OPERATOR_REQUEST);
  assert.equal(sent.volumePath, "");
  assert.deepEqual(sent.targets, [
    { targetPath: pathA, podNamespace: "apps", podName: "a", podUid: uidA, readonly: false, mountPropagation: Propagation.NONE },
    { targetPath: pathB, podNamespace: "apps", podName: "b", podUid: uidB, readonly: true, mountPropagation: Propagation.HOST_TO_CONTAINER },
  ]);
  // An answer for a path it was not given is nobody's; a target left unanswered is said to be.
  assert.deepEqual(
    res.pods.map((p) => [p.name, p.uid, p.state, p.reason]),
    [
      ["a", uidA, TargetState.RESTART_NEEDED, "StaleFuseMount"],
      ["b", uidB, TargetState.STATE_UNSPECIFIED, "NotAnswered"],
    ],
  );
});
