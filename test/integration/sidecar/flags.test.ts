// Documented flags that change what the running sidecar does, as a process — the
// environment-variable forms, --log-format=text, --log-level, --controller-ip, --stagingpath,
// an explicit --pod-uid, --termination-log. (config.test.ts covers parsing and defaults.)
import { after, afterEach, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { tempDir, type Proc, startProgram } from "../../support/proc.js";
import { call } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { CSI_ADDONS_NODE_NAME, DRIVER, NAMESPACE, NODE, POD, pv, volumeAttachment } from "../../support/fixtures.js";
import { HealVolumeRequest_Mode as Mode, VolumeHealerClient } from "../../../proto/gen/sidecar/v1/healer.js";
import { checkHealth } from "../../support/secure-sidecar.js";
import { reasonFor } from "../../support/heal-request.js";

let kube: KubeApi;
let stub: DriverStub;
const procs: Proc[] = [];

const createdByPodUid = () =>
  (kube.get("csiaddons.openshift.io/v1alpha1", "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as any)?.metadata.annotations?.[
    "sidecar.csiaddons.openshift.io/createdByPodUID"
  ];

const serving = (address: string) => checkHealth(address, grpc.credentials.createInsecure()).then((s) => s === "SERVING");

function refused(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, host);
    s.once("connect", () => (s.destroy(), resolve(false)));
    s.once("error", () => resolve(true));
  });
}

async function freePort(host: string): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, host, r));
  const { port } = srv.address() as { port: number };
  await new Promise((r) => srv.close(r));
  return port;
}

/** The sidecar configured by `args` and `env` only (no defaults added by the test support). */
function sidecar(args: string[], env: NodeJS.ProcessEnv = {}): Proc {
  // Empty values count as unset, so no variable of the test's own environment leaks in.
  const p = startProgram("sidecar", args, {
    env: { KUBECONFIG: "", NODE_ID: "", POD_NAME: "", POD_NAMESPACE: "", POD_UID: "", LOG_LEVEL: "", LOG_FORMAT: "", ...env },
  });
  procs.push(p);
  return p;
}

describe("flags and their environment variables, in a running sidecar", () => {
  before(async () => {
    kube = await startTestKube([pv("pv-a", { handle: "vol-a" }), volumeAttachment("pv-a", "vol-a")]);
    stub = await startDriverStub({ state: { volumes: { "vol-a": { state: "HEALTHY" } } } });
  });
  afterEach(async () => {
    await Promise.all(procs.splice(0).map((p) => p.stop(10_000)));
  });
  after(async () => {
    await stub?.stop();
    await kube?.stop();
  });

  test("configured only by environment variables: text logs, listen address, staging path, pod UID", async () => {
    const p = sidecar([], {
      CSI_ADDONS_ENDPOINT: stub.addonsEndpoint,
      NODE_ID: NODE,
      POD_NAME: POD,
      POD_NAMESPACE: NAMESPACE,
      POD_UID: "uid-from-env",
      KUBECONFIG: kube.kubeconfigPath,
      CONTROLLER_IP: "127.0.0.2",
      CONTROLLER_PORT: "0",
      ENABLE_AUTH: "false",
      LOG_FORMAT: "text",
      LOG_LEVEL: "info",
      STAGING_PATH: "/env/staging/",
      TERMINATION_LOG: join(tempDir(), "termination-log"),
    });
    const started = /^\S+ INFO sidecar started controllerPort=(\d+)/m;
    await p.waitForOutput(started, 30_000);
    const port = Number(started.exec(p.stdout())![1]);
    const address = `127.0.0.2:${port}`;
    await waitFor("SERVING on 127.0.0.2", () => serving(address), { timeoutMs: 20_000 });
    assert.ok(await refused("127.0.0.1", port), "CONTROLLER_IP: not listening on 127.0.0.1");
    assert.equal(createdByPodUid(), "uid-from-env");

    const client = new VolumeHealerClient(address, grpc.credentials.createInsecure());
    const r = await call(client, client.healVolume, { pvName: "pv-a", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) });
    assert.ok(r.ok, JSON.stringify(r));
    assert.ok((await call(client, client.getVolumeHealth, { pvName: "pv-a" })).ok);
    client.close();
    // At info (README, Logs): a heal is a change and gets its line; a routine health read does not.
    await p.waitForOutput(/ INFO call served method=\/sidecar\.v1\.VolumeHealer\/HealVolume /);
    assert.doesNotMatch(p.stdout(), /call served method=\/sidecar\.v1\.VolumeHealer\/GetVolumeHealth/);
    const heal = stub.calls({ method: "NodeHealVolume", volumeId: "vol-a" }).at(-1)!;
    assert.equal(
      (heal.request as { stagingTargetPath: string }).stagingTargetPath,
      `/env/staging/${DRIVER}/${createHash("sha256").update("vol-a").digest("hex")}/globalmount`,
    );

    const lines = p
      .stdout()
      .split("\n")
      .filter((l) => l !== "");
    for (const l of lines) {
      assert.match(l, /^\d{4}-\d\d-\d\dT[\d:.]+Z (ERROR|WARN|INFO) \S/, "LOG_FORMAT=text: timestamp, level, message");
      assert.throws(() => JSON.parse(l), SyntaxError, `not JSON: ${l}`);
    }
  });

  test("flags: --log-level=warn logs nothing below warn; --controller-ip, --controller-port and --pod-uid", async () => {
    const port = await freePort("127.0.0.3");
    const p = sidecar([
      `--csi-addons-address=${stub.addonsEndpoint}`,
      `--node-id=${NODE}`,
      `--pod=${POD}`,
      `--namespace=${NAMESPACE}`,
      "--pod-uid=uid-from-flag",
      `--kubeconfig=${kube.kubeconfigPath}`,
      "--controller-ip=127.0.0.3",
      `--controller-port=${port}`,
      "--enable-auth=false",
      "--log-level=warn",
      `--termination-log=${join(tempDir(), "termination-log")}`,
    ]);
    await waitFor("SERVING on 127.0.0.3", () => serving(`127.0.0.3:${port}`), { timeoutMs: 30_000 });
    assert.ok(await refused("127.0.0.1", port), "--controller-ip: not listening on 127.0.0.1");
    await waitFor("--pod-uid on the CSIAddonsNode", () => createdByPodUid() === "uid-from-flag", { timeoutMs: 10_000 });
    const lines = p
      .stdout()
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as { level: string; message: string });
    assert.ok(
      lines.some((l) => l.level === "warn" && /authentication is OFF/.test(l.message)),
      "warnings are logged",
    );
    assert.deepEqual(
      lines.filter((l) => !["warn", "error"].includes(l.level)),
      [],
      "nothing below warn",
    );
  });
});
