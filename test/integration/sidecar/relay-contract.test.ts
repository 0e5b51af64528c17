// The relay's promises checked where they land — on the driver's side of the socket
// (what it received, its deadline, when it was cancelled) and on /metrics — not from the client's
// own view. Real driver-stub, real sidecar, in-memory Kubernetes API. Every test passes alone.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type CallLogEntry, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { call, codeName } from "../../support/grpc.js";
import { peakOverlap } from "../../support/intervals.js";
import { waitFor } from "../../support/wait.js";
import { stubClients } from "../../support/driver-stub-clients.js";
import { DRIVER, NAMESPACE, NODE, pv, secret, volumeAttachment } from "../../support/fixtures.js";
import { secretDigest } from "../../../driver-stub/call-log.js";
import { HealVolumeRequest_Mode as Mode, type VolumeHealerClient } from "../../../proto/gen/sidecar/v1/healer.js";
import { NodeHealVolumeResponse_Result as Result } from "../../../proto/gen/healer/v1/healer.js";
import { reasonFor } from "../../support/heal-request.js";

const TIMEOUT_MS = 12_000;
const SECRET_TTL_MS = 2_000;
const STAGING_ROOT = "/custom/kubelet/csi-staging/";
const DEFAULT_MAX_INFLIGHT = 16;
const BURST_PVS = DEFAULT_MAX_INFLIGHT + 8;
/** csi-lib-utils' DefaultOperationsBuckets, as README documents them. */
/**
 * The driver computes its deadline from grpc-timeout when the headers arrive, so on a busy machine it
 * lies up to the transit time past the sidecar's; far less than the gaps these tests tell apart.
 */
const TRANSIT_MS = 1_000;
const DOCUMENTED_BUCKETS = ["0.1", "0.25", "0.5", "1", "2.5", "5", "10", "15", "25", "50", "120", "300", "600", "+Inf"];

let kube: KubeApi;
let stub: DriverStub;
let sidecar: SidecarProc;
let client: InstanceType<typeof VolumeHealerClient>;

const health = (pvName: string, deadlineMs?: number) => call(client, client.getVolumeHealth, { pvName }, { deadlineMs });
const heal = (pvName: string, mode = Mode.ALWAYS, deadlineMs?: number) =>
  call(client, client.healVolume, { pvName, mode, reason: reasonFor(mode) }, { deadlineMs });

/** The driver's call-log entries for a volume, optionally of one method. */
const driverCalls = (volumeId: string, method?: string): CallLogEntry[] => stub.calls({ server: "addons", volumeId, method });

describe("relay contract, seen from the driver", () => {
  before(async () => {
    const burst = Array.from({ length: BURST_PVS }, (_, i) => [pv(`pv-m-${i}`, { handle: `vol-m-${i}` }), volumeAttachment(`pv-m-${i}`, `vol-m-${i}`)]).flat();
    kube = await startTestKube([
      ...["slow", "cancel", "locked", "fail", "keys"].flatMap((n) => [pv(`pv-${n}`, { handle: `vol-${n}` }), volumeAttachment(`pv-${n}`, `vol-${n}`)]),
      secret(NAMESPACE, "rotating", { userID: "admin", userKey: "first-value-1" }),
      pv("pv-secret", { handle: "vol-secret", secret: { namespace: NAMESPACE, name: "rotating" } }),
      volumeAttachment("pv-secret", "vol-secret"),
      pv("pv-late", { handle: "vol-late" }),
      ...burst,
    ]);
    stub = await startDriverStub({
      state: {
        volumes: {
          "vol-slow": { state: "HEALTHY", delayMs: 60_000 },
          "vol-cancel": { state: "HEALTHY", delayMs: 60_000 },
          "vol-locked": { state: "ABNORMAL", locked: true },
          "vol-fail": { state: "ABNORMAL", heal: "FAIL" },
          "vol-keys": { state: "HEALTHY", delayMs: 1_500 },
          "vol-secret": { state: "HEALTHY" },
          "vol-late": { state: "HEALTHY" },
          // Long enough that every admitted call is still running when the last admitted one arrives.
          ...Object.fromEntries(Array.from({ length: BURST_PVS }, (_, i) => [`vol-m-${i}`, { state: "HEALTHY", delayMs: 5_000 }])),
        },
      },
    });
    // No --max-inflight: the default is under test. Auth off (the support default); auth has its own files.
    sidecar = await startSidecarProc({
      driverSocket: stub.addonsSocket,
      kubeconfig: kube.kubeconfigPath,
      args: [`--timeout=${TIMEOUT_MS}ms`, `--secret-cache-ttl=${SECRET_TTL_MS}ms`, `--stagingpath=${STAGING_ROOT}`],
    });
    await waitHealth(sidecar, "SERVING");
    client = sidecar.healer();
  });

  after(async () => {
    await sidecar?.stop();
    await stub?.stop();
    await kube?.stop();
  });

  test("deadline: the driver call carries the caller's shorter deadline and ends at it", async () => {
    const n = driverCalls("vol-slow").length;
    const sent = Date.now();
    const r = await health("pv-slow", 1_000);
    assert.equal(codeName((r as { code: grpc.status }).code), "DEADLINE_EXCEEDED");
    const e = await waitFor("the driver's log line", () => driverCalls("vol-slow")[n]);
    assert.ok(e.deadline !== null, "the driver call had a deadline");
    assert.ok(e.deadline <= sent + 1_000 + TRANSIT_MS, `driver deadline ${e.deadline - sent} ms after sending, not past the caller's 1000 ms`);
    assert.ok(e.deadline >= sent + 500, `driver deadline ${e.deadline - sent} ms after sending: the caller's, not something shorter`);
    assert.ok(e.cancelled !== null && e.cancelled <= e.deadline + TRANSIT_MS, "the driver call ended at its deadline");
  });

  test("deadline: --timeout bounds the driver call when the caller allows longer", async () => {
    const n = driverCalls("vol-slow").length;
    const sent = Date.now();
    const r = await health("pv-slow", 30_000);
    assert.equal(codeName((r as { code: grpc.status }).code), "DEADLINE_EXCEEDED");
    const e = await waitFor("the driver's log line", () => driverCalls("vol-slow")[n]);
    assert.ok(
      e.deadline !== null && e.deadline <= sent + TIMEOUT_MS + TRANSIT_MS,
      `driver deadline ${e.deadline! - sent} ms after sending, not past --timeout`,
    );
    assert.ok(e.deadline >= sent + TIMEOUT_MS - 2_000, `driver deadline ${e.deadline - sent} ms after sending: about --timeout`);
  });

  test("cancellation: a caller that cancels cancels the driver call", async () => {
    const n = driverCalls("vol-cancel").length;
    let pending!: grpc.ClientUnaryCall;
    const answered = new Promise<grpc.ServiceError | null>((resolve) => {
      pending = client.getVolumeHealth({ pvName: "pv-cancel" }, new grpc.Metadata(), { deadline: Date.now() + 30_000 }, (err) => resolve(err));
    });
    await waitFor(
      "the call to reach the driver",
      () => stub.proc.stdout().split("recv /healer.v1.VolumeHealerNode/NodeGetVolumeHealth vol-cancel").length > n + 1,
    );
    const cancelledAt = Date.now();
    pending.cancel();
    assert.equal((await answered)?.code, grpc.status.CANCELLED);
    const e = await waitFor("the driver's log line", () => driverCalls("vol-cancel")[n], { timeoutMs: 5_000 });
    assert.equal(e.code, "CANCELLED", "the driver saw a cancellation, not a deadline");
    assert.ok(
      e.cancelled !== null && e.cancelled >= cancelledAt - 5 && e.cancelled < cancelledAt + 2_000,
      `cancelled ${e.cancelled! - cancelledAt} ms after the caller cancelled`,
    );
    assert.ok(e.deadline !== null && e.cancelled < e.deadline - 500, "well before its deadline");
  });

  test("passed through unchanged: the driver's status code and message reach the caller as sent", async () => {
    const direct = stubClients(stub);
    try {
      for (const [pvName, volumeId] of [
        ["pv-locked", "vol-locked"],
        ["pv-fail", "vol-fail"],
      ] as const) {
        const viaSidecar = await heal(pvName);
        assert.equal(viaSidecar.ok, false, pvName);
        // The same request straight to the driver: what it sends for this volume.
        const sent = await direct.heal({ volumeId, stagingTargetPath: "/x" }).then(
          () => undefined,
          (e: grpc.ServiceError) => e,
        );
        assert.ok(sent, `the driver fails ${volumeId}`);
        assert.equal(codeName((viaSidecar as { code: grpc.status }).code), codeName(sent.code), pvName);
        assert.equal((viaSidecar as { details: string }).details, sent.details, pvName);
      }
    } finally {
      direct.close();
    }
  });

  test("a Kubernetes API that fails transiently (5xx, 429) → UNAVAILABLE naming the API's status, driver not called", async () => {
    for (const status of [503, 429] as const) {
      const n = driverCalls("vol-keys").length;
      // Its watch and then its read (the watch showed nothing) both fail.
      kube.faults.failNext(2, status, { resource: "persistentvolumes" });
      const r = await health("pv-keys").finally(() => kube.faults.clear());
      assert.equal(codeName((r as { code: grpc.status }).code), "UNAVAILABLE", (r as { details: string }).details);
      assert.match((r as { details: string }).details, new RegExp(`^Kubernetes API: ${status} `));
      assert.equal(driverCalls("vol-keys").length, n);
    }
  });

  test("the watched Node: a volume that appears in its volumesInUse after the start is found there", async () => {
    const before = await health("pv-late");
    assert.equal(codeName((before as { code: grpc.status }).code), "FAILED_PRECONDITION", "not in use on this node yet");
    const node = kube.get("v1", "Node", undefined, NODE) as Record<string, any>;
    kube.update({ ...node, status: { ...node.status, volumesInUse: [`kubernetes.io/csi/${DRIVER}^vol-late`] } });
    const r = await waitFor(
      "the Node change seen",
      async () => {
        const h = await health("pv-late");
        return h.ok ? h : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    assert.equal(r.value.volumeId, "vol-late");
  });

  test("metrics: a failing driver call is counted with its real grpc_status_code; buckets exactly the documented ones", async () => {
    const series = `csi_sidecar_operations_seconds_count{driver_name="${DRIVER}",method_name="/healer.v1.VolumeHealerNode/NodeHealVolume",grpc_status_code="ABORTED"}`;
    const count = (text: string) =>
      Number(
        text
          .split("\n")
          .find((l) => l.startsWith(series + " "))
          ?.slice(series.length + 1) ?? 0,
      );
    const before = count(await sidecar.metrics());
    const r = await heal("pv-locked");
    assert.equal(codeName((r as { code: grpc.status }).code), "ABORTED");
    const text = await sidecar.metrics();
    assert.equal(count(text), before + 1, `one more ${series}`);
    const buckets = text
      .split("\n")
      .filter((l) => l.startsWith(`csi_sidecar_operations_seconds_bucket{`) && l.includes('grpc_status_code="ABORTED"'))
      .map((l) => /le="([^"]+)"/.exec(l)![1]);
    assert.deepEqual(buckets, DOCUMENTED_BUCKETS);
  });

  test("single flight keys: concurrent GetVolumeHealth, HealVolume ALWAYS and IF_ABNORMAL of one PV are separate driver interactions", async () => {
    const healthBefore = driverCalls("vol-keys", "NodeGetVolumeHealth").length;
    const healBefore = driverCalls("vol-keys", "NodeHealVolume").length;
    const [h, always, ifAbnormal] = await Promise.all([health("pv-keys"), heal("pv-keys", Mode.ALWAYS), heal("pv-keys", Mode.IF_ABNORMAL)]);
    assert.ok(h.ok && always.ok && ifAbnormal.ok, JSON.stringify([h, always, ifAbnormal]));
    // A restart's heal re-makes the data path of a healthy volume too; the check-first one need not.
    assert.equal(always.value.result, Result.HEALED);
    assert.equal(ifAbnormal.value.result, Result.NOT_NEEDED);
    assert.equal(driverCalls("vol-keys", "NodeHealVolume").length - healBefore, 1, "ALWAYS heals once");
    assert.equal(driverCalls("vol-keys", "NodeGetVolumeHealth").length - healthBefore, 2, "GetVolumeHealth and IF_ABNORMAL each check health");
  });

  test("secret values: the driver receives the stage secret's decoded values, under --stagingpath", async () => {
    const r = await heal("pv-secret");
    assert.ok(r.ok, JSON.stringify(r));
    const e = driverCalls("vol-secret", "NodeHealVolume").at(-1)!;
    const request = e.request as { secrets: Record<string, string>; stagingTargetPath: string };
    const current = (kube.get("v1", "Secret", NAMESPACE, "rotating") as { data: Record<string, string> }).data;
    const decoded = Object.fromEntries(Object.entries(current).map(([k, v]) => [k, secretDigest(Buffer.from(v, "base64").toString())]));
    assert.deepEqual(request.secrets, decoded);
    assert.ok(Object.values(request.secrets).every((d) => /^sha256:[0-9a-f]{16}$/.test(d)));
    const hex = createHash("sha256").update("vol-secret").digest("hex");
    assert.equal(request.stagingTargetPath, `${STAGING_ROOT}${DRIVER}/${hex}/globalmount`);
  });

  test("--secret-cache-ttl: a rotated secret's new value reaches the driver after the TTL, not before", async () => {
    const userKeyAtDriver = async () => {
      assert.ok((await heal("pv-secret")).ok);
      const e = driverCalls("vol-secret", "NodeHealVolume").at(-1)!;
      return { e, userKey: (e.request as { secrets: Record<string, string> }).secrets["userKey"] };
    };
    const rotate = (value: string) => {
      const cur = kube.get("v1", "Secret", NAMESPACE, "rotating") as Record<string, any>;
      kube.update({ ...cur, data: { ...cur.data, userKey: Buffer.from(value).toString("base64") } });
      return Date.now();
    };
    const seen = (value: string) =>
      waitFor(
        `${value} at the driver`,
        async () => {
          const r = await userKeyAtDriver();
          return r.userKey === secretDigest(value) ? r : undefined;
        },
        { timeoutMs: SECRET_TTL_MS + 15_000, intervalMs: 200 },
      );
    // A: the cache entry that serves A was read after rotatedA, so it lives at least until rotatedA + TTL.
    const a = `value-a-${Date.now()}`;
    const rotatedA = rotate(a);
    await seen(a);
    const b = `value-b-${Date.now()}`;
    rotate(b);
    const right = await userKeyAtDriver();
    if (right.e.t0 < rotatedA + SECRET_TTL_MS - 200) assert.equal(right.userKey, secretDigest(a), "within the TTL the cached value is used");
    const fresh = await seen(b);
    assert.ok(
      fresh.e.t0 >= rotatedA + SECRET_TTL_MS,
      `the new value arrived ${Math.round(fresh.e.t0 - rotatedA)} ms after the cached one was read, within the ${SECRET_TTL_MS} ms TTL`,
    );
  });

  test(`--max-inflight defaults to ${DEFAULT_MAX_INFLIGHT}: that many driver calls at once, the rest wait (none refused)`, async () => {
    const before = stub.calls({ method: "NodeGetVolumeHealth" }).length;
    const outcomes = await Promise.all(Array.from({ length: BURST_PVS }, (_, i) => health(`pv-m-${i}`, 60_000)));
    assert.deepEqual(
      outcomes.filter((o) => !o.ok),
      [],
      "the default queue holds the rest",
    );
    const calls = stub
      .calls({ method: "NodeGetVolumeHealth" })
      .slice(before)
      .filter((c) => (c.request as { volumeId: string }).volumeId.startsWith("vol-m-"));
    assert.equal(calls.length, BURST_PVS);
    assert.equal(peakOverlap(calls), DEFAULT_MAX_INFLIGHT);
  });
});
