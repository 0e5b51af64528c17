// The call log: at the default log level routine successful calls write nothing; heals
// and failures do, identical failures are summarised; after "sidecar stopped" nothing is written.
import { afterEach, before, after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { HealVolumeRequest_Mode as Mode } from "../../../proto/gen/sidecar/v1/healer.js";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub } from "../../support/driver-stub.js";
import { pv, volumeAttachment } from "../../support/fixtures.js";
import { call, rawUnary } from "../../support/grpc.js";
import { tempDir } from "../../support/proc.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { reasonFor } from "../../support/heal-request.js";

let kube: KubeApi;
const running: { stop(): Promise<unknown> }[] = [];
const track = <T extends { stop(): Promise<unknown> }>(x: T) => (running.push(x), x);

async function startPair(args: string[]): Promise<SidecarProc> {
  const dir = tempDir();
  track(await startDriverStub({ dir, state: { volumes: { "vol-a": { state: "HEALTHY" } } } }));
  const sidecar = track(await startSidecarProc({ driverSocket: join(dir, "addons.sock"), kubeconfig: kube.kubeconfigPath, args }));
  await waitHealth(sidecar, "SERVING");
  return sidecar;
}

/** Lines about served calls (they carry the method). */
const callLines = (s: SidecarProc, from = 0) =>
  s
    .logLines()
    .slice(from)
    .filter((l) => typeof l.method === "string");

describe("the call log at the default level", () => {
  before(async () => {
    kube = await startTestKube([pv("pv-a", { handle: "vol-a" }), volumeAttachment("pv-a", "vol-a")]);
  });
  after(async () => kube.stop());
  afterEach(async () => {
    await Promise.all(running.splice(0).map((r) => r.stop()));
  });

  test("routine health checks and identity calls write no line per call; heals and failures do; a burst of identical failures is one summary", async () => {
    const sidecar = await startPair(["--log-level=info"]);
    const healer = sidecar.healer();
    const identity = new grpc.Client(sidecar.address, grpc.credentials.createInsecure());
    try {
      const from = sidecar.logLines().length;
      for (let i = 0; i < 30; i++) {
        const h = await call(healer, healer.getVolumeHealth, { pvName: "pv-a" });
        assert.ok(h.ok, JSON.stringify(h));
        assert.equal((await rawUnary(identity, "/identity.Identity/GetCapabilities", Buffer.alloc(0))).code, grpc.status.OK);
      }
      assert.deepEqual(callLines(sidecar, from), [], "no line for 60 routine calls");

      const healed = await call(healer, healer.healVolume, { pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) });
      assert.ok(healed.ok, JSON.stringify(healed));
      const failures = 40;
      const answers = await Promise.all(Array.from({ length: failures }, () => call(healer, healer.getVolumeHealth, { pvName: "pv-gone" })));
      assert.ok(answers.every((a) => !a.ok && a.code === grpc.status.NOT_FOUND));

      const lines = callLines(sidecar, from);
      assert.equal(
        lines.filter((l) => l.message === "call served" && l.method === "/sidecar.v1.VolumeHealer/HealVolume" && l.pv === "pv-a").length,
        1,
        "every heal",
      );
      const failed = lines.filter((l) => l.message === "call failed" && l.pv === "pv-gone");
      assert.ok(failed.length >= 1 && failed.length <= 2, `the first failure of a kind at once, not one per call: ${failed.length}`);
      assert.equal(failed[0]!.code, "NOT_FOUND");

      // The summary comes at the end of its window, or at shutdown at the latest, before "stopped".
      assert.equal(await sidecar.stop(), 0);
      const all = sidecar.logLines();
      const summaries = all.filter((l) => l.message === "call failed (repeated)" && l.pv === "pv-gone");
      assert.ok(summaries.length >= 1, "a summary line");
      const counted = failed.length + summaries.reduce((n, l) => n + Number(l.repeated), 0);
      assert.equal(counted, failures, "lines plus summarised repeats account for every failure");
      for (const s of summaries) {
        assert.ok(Date.parse(String(s.first)) <= Date.parse(String(s.last)), "first and last time");
      }
      assert.ok(all.indexOf(summaries.at(-1)!) < all.findIndex((l) => l.message === "sidecar stopped"));
    } finally {
      identity.close();
    }
  });

  test('after "sidecar stopped" nothing more is written, even at debug', async () => {
    const sidecar = await startPair(["--log-level=debug"]);
    const healer = sidecar.healer();
    await call(healer, healer.getVolumeHealth, { pvName: "pv-a" });
    await call(healer, healer.getVolumeHealth, { pvName: "pv-gone" });
    assert.equal(await sidecar.stop(), 0);
    const messages = sidecar.logLines().map((l) => l.message);
    assert.equal(messages.at(-1), "sidecar stopped", `lines after it: ${JSON.stringify(messages.slice(messages.indexOf("sidecar stopped")))}`);
    assert.equal(sidecar.proc.stderr(), "");
  });
});
