// SIGTERM as DESIGN 4.5 and README promise it — NOT_SERVING and /readyz 503 at once
// while a call is still in flight, new calls refused during the drain, the in-flight call finished,
// and a stuck call cut off at --shutdown-grace rather than holding the exit; open health Watch
// streams told NOT_SERVING and then ended, so they never hold the exit.
import { after, afterEach, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { healthInFlight, startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { call, codeName } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { pv, volumeAttachment } from "../../support/fixtures.js";

const HealthClient = grpc.makeClientConstructor(healthService as grpc.ServiceDefinition, "grpc.health.v1.Health");

let kube: KubeApi;
let stub: DriverStub;
const running: { stop(): Promise<unknown> }[] = [];

before(async () => {
  kube = await startTestKube(["slow", "fast", "stuck"].flatMap((n) => [pv(`pv-${n}`, { handle: `vol-${n}` }), volumeAttachment(`pv-${n}`, `vol-${n}`)]));
  stub = await startDriverStub({
    state: {
      volumes: { "vol-slow": { state: "HEALTHY", delayMs: 4_000 }, "vol-fast": { state: "HEALTHY" }, "vol-stuck": { state: "HEALTHY", delayMs: 120_000 } },
    },
  });
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop()));
});

after(async () => {
  await stub?.stop();
  await kube?.stop();
});

async function sidecarWith(args: string[] = []): Promise<SidecarProc> {
  const s = await startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath, args });
  running.push(s);
  await waitHealth(s, "SERVING");
  return s;
}

const received = (volumeId: string) => stub.arrived("NodeGetVolumeHealth", volumeId);

describe("SIGTERM", () => {
  test("with a call in flight: NOT_SERVING (gRPC watch) and /readyz 503 at once, new calls refused, the call finishes, exit 0", async () => {
    const sidecar = await sidecarWith();
    // A health watch opened before the signal: once draining, the server takes no new calls, so only a
    // stream that is already open can tell NOT_SERVING.
    const watcher = new HealthClient(sidecar.address, grpc.credentials.createInsecure());
    const statuses: string[] = [];
    const stream = (watcher as unknown as { watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }> }).watch({ service: "" });
    stream.on("data", (m: { status: string }) => statuses.push(m.status));
    stream.on("error", () => {});
    await waitFor("the watch to say SERVING", () => statuses.includes("SERVING"));

    const client = sidecar.healer();
    assert.ok((await call(client, client.getVolumeHealth, { pvName: "pv-fast" })).ok, "the client's connection is up");
    const inflight = await healthInFlight(client, stub, "pv-slow", "vol-slow", 30_000);

    sidecar.proc.child.kill("SIGTERM");
    await waitFor("the watch to say NOT_SERVING", () => statuses.at(-1) === "NOT_SERVING", { timeoutMs: 3_000 });
    await waitFor("/readyz 503", async () => (await sidecar.readyz()) === 503, { timeoutMs: 3_000 });
    assert.equal(inflight.done(), false, "NOT_SERVING and 503 came while the call was still in flight");

    const fastBefore = received("vol-fast");
    const refused = await call(client, client.getVolumeHealth, { pvName: "pv-fast" }, { deadlineMs: 5_000 });
    assert.equal(refused.ok, false, "a new call during the drain is refused");
    assert.equal(codeName((refused as { code: number }).code), "UNAVAILABLE", (refused as { details: string }).details);
    assert.equal(received("vol-fast"), fastBefore, "the refused call never reached the driver");
    assert.equal(inflight.done(), false, "refused while the drain was still going on");

    const r = await inflight.outcome;
    assert.ok(r.ok, `the in-flight call finished: ${JSON.stringify(r)}`);
    assert.equal(await sidecar.proc.exited, 0);
    stream.cancel();
    watcher.close();
  });

  test("with health Watches open and no call in flight: each watcher reads NOT_SERVING, then its stream ends; the exit does not wait for --shutdown-grace", async () => {
    // A grace far longer than the bound below: only ended Watch streams let the drain finish that soon.
    const GRACE_MS = 20_000;
    const EXIT_WITHIN_MS = 5_000;
    const sidecar = await sidecarWith([`--shutdown-grace=${GRACE_MS}ms`]);
    const watcher = new HealthClient(sidecar.address, grpc.credentials.createInsecure());
    // What each stream told, in order: its statuses, then how it ended.
    const watch = (service: string) => {
      const told: string[] = [];
      const stream = (watcher as unknown as { watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }> }).watch({ service });
      stream.on("data", (m: { status: string }) => told.push(m.status));
      stream.on("status", (st: grpc.StatusObject) => told.push(`ended ${codeName(st.code)}`));
      stream.on("error", () => {});
      return { told, stream };
    };
    // An unknown name's Watch stays open too (its service may appear later, says the protocol).
    const watches = [watch(""), watch("sidecar.v1.VolumeHealer"), watch("no.such.Service")];
    try {
      await waitFor(
        "every watch telling its status",
        () => watches[0]!.told.includes("SERVING") && watches[1]!.told.includes("SERVING") && watches[2]!.told.length > 0,
      );
      let exited = false;
      void sidecar.proc.exited.then(() => (exited = true));
      const signalled = Date.now();
      sidecar.proc.child.kill("SIGTERM");
      await waitFor("the sidecar to exit", () => exited, { timeoutMs: EXIT_WITHIN_MS });
      const took = Date.now() - signalled;
      assert.equal(await sidecar.proc.exited, 0);
      assert.ok(took < EXIT_WITHIN_MS, `exited ${took} ms after SIGTERM with --shutdown-grace ${GRACE_MS}ms`);
      assert.ok(!sidecar.proc.stdout().includes("grace period over"), "nothing was cut off at the grace");
      await waitFor("every watch to end", () => watches.every((w) => w.told.at(-1)?.startsWith("ended")), { timeoutMs: 3_000 });
      assert.deepEqual(watches[0]!.told, ["SERVING", "NOT_SERVING", "ended UNAVAILABLE"], "NOT_SERVING read before the stream ended");
      assert.deepEqual(watches[1]!.told, ["SERVING", "NOT_SERVING", "ended UNAVAILABLE"], "NOT_SERVING read before the stream ended");
      assert.deepEqual(watches[2]!.told, ["SERVICE_UNKNOWN", "ended UNAVAILABLE"]);
    } finally {
      for (const w of watches) w.stream.cancel();
      watcher.close();
    }
  });

  test("a stuck call does not hold the exit past --shutdown-grace: it is cut off, the driver call cancelled, exit 0", async () => {
    const GRACE_MS = 2_000;
    const sidecar = await sidecarWith([`--shutdown-grace=${GRACE_MS}ms`]);
    const client = sidecar.healer();
    const before = stub.calls({ volumeId: "vol-stuck" }).length;
    const stuck = await healthInFlight(client, stub, "pv-stuck", "vol-stuck", 120_000);
    const signalled = Date.now();
    sidecar.proc.child.kill("SIGTERM");
    // SIGKILL (and a failed exit code) only if the sidecar overstays by far.
    const guard = setTimeout(() => sidecar.proc.child.kill("SIGKILL"), GRACE_MS + 20_000);
    const code = await sidecar.proc.exited;
    clearTimeout(guard);
    const took = Date.now() - signalled;
    assert.equal(code, 0);
    assert.ok(took >= GRACE_MS - 100, `waited the grace period for the call (${took} ms)`);
    assert.ok(took < GRACE_MS + 10_000, `exited ${took} ms after SIGTERM with --shutdown-grace ${GRACE_MS}ms and a 120 s call`);
    const r = await stuck.outcome;
    assert.equal(r.ok, false, "the stuck call was cut off");
    const e = await waitFor("the driver's log line of the stuck call", () => stub.calls({ volumeId: "vol-stuck" })[before], { timeoutMs: 5_000 });
    assert.equal(e.code, "CANCELLED", "the driver call was cancelled, not left running");
  });
});
