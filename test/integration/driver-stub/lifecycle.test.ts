// Start-up and shutdown of a real driver-stub process: socket files, stale sockets, signals.
import assert from "node:assert/strict";
import { existsSync, lstatSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { NodeHealVolumeResponse_Result as Result, VolumeHealth_State as State } from "../../../proto/gen/healer/v1/healer.js";
import { restartDriverStub, startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { tempDir, startProgram } from "../../support/proc.js";
import { stubClients } from "../../support/driver-stub-clients.js";
import { STAGING_PATH, status } from "../../support/driver-stub-fixture.js";

const isSocket = (path: string) => existsSync(path) && lstatSync(path).isSocket();

async function bootId(stub: DriverStub): Promise<string> {
  const c = stubClients(stub);
  try {
    return (await c.getIdentity()).manifest.bootId!;
  } finally {
    c.close();
  }
}

describe("driver-stub lifecycle", () => {
  const stubs: DriverStub[] = [];
  const track = (s: DriverStub) => (stubs.push(s), s);
  afterEach(async () => {
    await Promise.all(stubs.splice(0).map((s) => s.stop()));
  });

  it("names its driver and the boot id GetIdentity reports, and prints `driver-stub ready` once both sockets are bound, after the time it bound them by its own clock", async () => {
    const spawned = Date.now();
    const stub = track(await startDriverStub());
    const read = Date.now();
    assert.ok(isSocket(stub.addonsSocket) && isSocket(stub.csiSocket));
    assert.equal(stub.proc.stdout().match(/^driver-stub ready$/gm)?.length, 1);
    // The time a bench measures a restart from: the stub's, not when a busy reader saw the line.
    assert.ok(stub.readyAt >= spawned && stub.readyAt <= read, `${spawned} <= ${stub.readyAt} <= ${read}`);
    const [, name, id] = /^driver (\S+), boot id (\S+)$/m.exec(stub.proc.stdout()) ?? [];
    assert.equal(id, await bootId(stub));
    assert.equal(name, stub.name);
  });

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`${signal}: exits 0 and removes both socket files`, async () => {
      const stub = track(await startDriverStub());
      stub.proc.child.kill(signal);
      assert.equal(await stub.proc.exited, 0);
      assert.ok(!existsSync(stub.addonsSocket), "addons socket removed");
      assert.ok(!existsSync(stub.csiSocket), "csi socket removed");
      assert.equal(stub.proc.stderr(), "");
      assert.equal(stub.proc.stdout().match(new RegExp(`^${signal}: shutting down$`, "gm"))?.length, 1);
    });
  }

  it("SIGTERM with a call that ends within the grace period: the call is answered, then the stub exits 0", async () => {
    const stub = track(await startDriverStub({ state: { volumes: { v: { state: "ABNORMAL", delayMs: 1_000 } } } }));
    const c = stubClients(stub);
    try {
      const pending = c.heal.start({ volumeId: "v", stagingTargetPath: STAGING_PATH }, 30_000);
      await stub.proc.waitForOutput("recv /healer.v1.VolumeHealerNode/NodeHealVolume v");
      stub.proc.child.kill("SIGTERM");
      assert.equal((await pending.response).result, Result.HEALED);
      assert.equal(await stub.proc.exited, 0);
    } finally {
      c.close();
    }
  });

  it("SIGTERM with a call in flight: the call is cut off after the grace period and the stub still exits 0; a second signal meanwhile starts no second shutdown", async () => {
    const stub = track(await startDriverStub({ state: { volumes: { v: { delayMs: 60_000 } } } }));
    const c = stubClients(stub);
    try {
      const pending = c.heal.start({ volumeId: "v", stagingTargetPath: STAGING_PATH }, 60_000);
      await stub.proc.waitForOutput("recv /healer.v1.VolumeHealerNode/NodeHealVolume v");
      stub.proc.child.kill("SIGTERM");
      await stub.proc.waitForOutput("SIGTERM: shutting down");
      stub.proc.child.kill("SIGINT");
      await assert.rejects(pending.response, (err: { code: status }) => [status.CANCELLED, status.UNAVAILABLE].includes(err.code));
      assert.equal(await stub.proc.exited, 0);
      assert.ok(!existsSync(stub.addonsSocket) && !existsSync(stub.csiSocket));
      assert.equal(stub.calls({ method: "NodeHealVolume" }).at(-1)?.code, "CANCELLED", "the cut-off call is logged");
      assert.equal(stub.proc.stdout().match(/: shutting down$/gm)?.length, 1, stub.proc.stdout());
      assert.equal(stub.proc.stderr(), "");
    } finally {
      c.close();
    }
  });

  it("removes stale socket files a killed stub left behind, and serves with a new boot id", async () => {
    const first = track(await startDriverStub({ state: { volumes: { v: { state: "ABNORMAL" } } } }));
    const firstBoot = await bootId(first);
    await first.kill();
    assert.ok(isSocket(first.addonsSocket) && isSocket(first.csiSocket), "SIGKILL leaves both socket files");
    const second = track(await restartDriverStub(first));
    assert.notEqual(await bootId(second), firstBoot);
    const c = stubClients(second);
    try {
      assert.equal((await c.health({ volumeId: "v" })).health?.state, State.ABNORMAL, "same state file");
      await c.stage({ volumeId: "v", stagingTargetPath: STAGING_PATH, volumeCapability: { accessType: { $case: "block", block: {} } } });
    } finally {
      c.close();
    }
  });

  it("never takes over the socket of a stub that is still serving: exits 1 and leaves it alone", async () => {
    const live = track(await startDriverStub());
    const intruder = startProgram("driver-stub", [
      "--name=intruder",
      `--addons-endpoint=${live.addonsEndpoint}`,
      `--csi-endpoint=unix://${join(live.dir, "other-csi.sock")}`,
    ]);
    assert.equal(await intruder.exited, 1);
    assert.match(intruder.stderr(), /another server is listening on .*addons\.sock/);
    assert.ok(!existsSync(join(live.dir, "other-csi.sock")), "nothing half-started");
    assert.ok(isSocket(live.addonsSocket));
    assert.equal(await bootId(live), await bootId(live), "the first stub still answers");
  });

  it("refuses to delete a file that is not a socket", async () => {
    const dir = tempDir("driver-stub-");
    const notASocket = join(dir, "addons.sock");
    writeFileSync(notASocket, "precious");
    const proc = startProgram("driver-stub", ["--name=x", `--addons-endpoint=unix://${notASocket}`, `--csi-endpoint=unix://${dir}/csi.sock`]);
    assert.equal(await proc.exited, 1);
    assert.match(proc.stderr(), /exists and is not a socket/);
    assert.equal(readFileSync(notASocket, "utf8"), "precious");
  });

  it("the call log survives restarts: lines are appended, never truncated", async () => {
    const first = track(await startDriverStub());
    await bootId(first);
    const second = track(await restartDriverStub(first));
    await bootId(second);
    assert.equal(second.calls({ method: "GetIdentity" }).length, 2);
  });
});
