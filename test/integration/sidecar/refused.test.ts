// Refused connections and calls: a plaintext client on the TLS port, a failed TLS handshake and a call refused
// by auth each leave one rate-limited log line (peer and reason) and count in
// csi_addons_sidecar_refused_total{reason}.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub } from "../../support/driver-stub.js";
import { tempDir } from "../../support/proc.js";
import { startSidecarProc, type SidecarProc } from "../../support/sidecar.js";
import { waitFor } from "../../support/wait.js";
import { rawUnary } from "../../support/grpc.js";
import {
  AUDIENCE,
  HEALER_USER,
  TLS_CLIENT_OPTIONS,
  allowHealer,
  authArgs,
  checkHealth,
  makeTlsFiles,
  tlsCredentials,
  type TlsFiles,
} from "../../support/secure-sidecar.js";

let kube: KubeApi;
let sidecar: SidecarProc;
let tls: TlsFiles;
const stops: (() => Promise<unknown>)[] = [];

const HEAL = "/sidecar.v1.VolumeHealer/GetVolumeHealth";

async function refusedCount(reason: string): Promise<number> {
  const m = new RegExp(`^csi_addons_sidecar_refused_total\\{reason="${reason}"\\} (\\d+)$`, "m").exec(await sidecar.metrics());
  assert.ok(m, `csi_addons_sidecar_refused_total{reason="${reason}"} is exported`);
  return Number(m[1]);
}

const lines = (message: string, reason: string) => sidecar.logLines().filter((l) => l.message === message && l.reason === reason);

/** Tries `attempts` calls with these credentials; each must fail with `code`. */
async function attempt(creds: grpc.ChannelCredentials, attempts: number, code: grpc.status, metadata: Record<string, string> = {}): Promise<void> {
  for (let i = 0; i < attempts; i++) {
    // A fresh channel each time: one more connection (or call) the sidecar refuses.
    const client = new grpc.Client(sidecar.address, creds, TLS_CLIENT_OPTIONS);
    const r = await rawUnary(client, HEAL, Buffer.alloc(0), metadata, 5_000);
    client.close();
    assert.equal(r.code, code, `${grpc.status[r.code]}: ${r.details}`);
  }
}

describe("refused connections and calls", () => {
  before(async () => {
    kube = await startTestKube();
    kube.auth.addToken("good-token", { username: HEALER_USER, audiences: [AUDIENCE] });
    kube.auth.addToken("bob-token", { username: "bob", audiences: [AUDIENCE] });
    allowHealer(kube);
    const dir = tempDir();
    tls = await makeTlsFiles(dir);
    const stub = await startDriverStub({ dir });
    stops.push(() => stub.stop());
    sidecar = await startSidecarProc({
      driverSocket: join(dir, "addons.sock"),
      kubeconfig: kube.kubeconfigPath,
      args: [...authArgs(AUDIENCE, tls), "--log-level=info"],
    });
    stops.push(() => sidecar.stop());
    await waitFor("SERVING over TLS", async () => (await checkHealth(sidecar.address, tlsCredentials(tls), TLS_CLIENT_OPTIONS)) === "SERVING");
  });
  after(async () => {
    for (const s of stops.reverse()) await s();
    await kube.stop();
  });

  for (const [name, reason, creds] of [
    ["a plaintext client on the TLS port", "plaintext", () => grpc.credentials.createInsecure()],
    ["a client that does not trust the certificate (failed handshake)", "tls_handshake", () => grpc.credentials.createSsl()],
  ] as const) {
    test(`${name}: one line with peer and reason, counted as ${reason}`, async () => {
      await attempt(creds(), 5, grpc.status.UNAVAILABLE);
      const counted = await waitFor(`${reason} counted`, async () => ((await refusedCount(reason)) >= 5 ? refusedCount(reason) : undefined));
      const logged = lines("connection refused", reason);
      assert.equal(logged.length, 1, `one line for ${counted} refused connections`);
      assert.match(String(logged[0]!.peer), /^127\.0\.0\.1:\d+$/);
      assert.ok(String(logged[0]!.error).length > 0);
    });
  }

  test("calls refused by auth: one line per reason with peer, counted by reason; an allowed call is not counted", async () => {
    await attempt(tlsCredentials(tls), 4, grpc.status.UNAUTHENTICATED);
    await attempt(tlsCredentials(tls), 3, grpc.status.PERMISSION_DENIED, { authorization: "Bearer bob-token" });
    await attempt(tlsCredentials(tls), 1, grpc.status.INVALID_ARGUMENT, { authorization: "Bearer good-token" });
    assert.equal(await refusedCount("unauthenticated"), 4);
    assert.equal(await refusedCount("permission_denied"), 3);
    for (const reason of ["unauthenticated", "permission_denied"]) {
      const logged = lines("call refused", reason);
      assert.equal(logged.length, 1, `one line for ${reason}`);
      assert.match(String(logged[0]!.peer), /127\.0\.0\.1:\d+$/);
      assert.equal(logged[0]!.method, HEAL);
    }
    // At shutdown the repeats are summarised.
    assert.equal(await sidecar.stop(), 0);
    const summary = lines("call refused (repeated)", "unauthenticated");
    assert.equal(summary.length, 1);
    assert.equal(summary[0]!.repeated, 3);
    assert.ok(lines("connection refused (repeated)", "plaintext").length <= 1);
  });
});
