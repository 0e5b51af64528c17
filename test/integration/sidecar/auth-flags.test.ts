// The auth flags do what README says — a custom --auth-verb/--auth-group/--auth-resource
// is what the SubjectAccessReview asks, and --auth-cache-ttl bounds how long a revoked permission
// keeps working. Every auth flag is passed explicitly, so these hold whatever the defaults are.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { call, codeName } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { NAMESPACE, pv, volumeAttachment } from "../../support/fixtures.js";
import { VolumeHealerClient } from "../../../proto/gen/sidecar/v1/healer.js";
import { AUDIENCE, TLS_CLIENT_OPTIONS, authArgs, checkHealth, makeTlsFiles, tlsCredentials, type TlsFiles } from "../../support/secure-sidecar.js";

const TTL_MS = 1_500;
const RULE = { verb: "heal", group: "healer.example.com", resource: "volumes" };

let kube: KubeApi;
let stub: DriverStub;
let sidecar: SidecarProc;
let tls: TlsFiles;
let client: InstanceType<typeof VolumeHealerClient>;

/** A caller with its own token (decisions are cached per token). */
function caller(name: string, allowed: "custom" | "default" | "none"): string {
  const user = `system:serviceaccount:${NAMESPACE}:${name}`;
  kube.auth.addToken(`${name}-token`, { username: user, audiences: [AUDIENCE] });
  if (allowed === "custom") kube.auth.allow(user, { verbs: [RULE.verb], apiGroups: [RULE.group], resources: [`${RULE.resource}/heal`], namespace: NAMESPACE });
  if (allowed === "default")
    kube.auth.allow(user, { verbs: ["update", "call"], apiGroups: ["csiaddons.openshift.io"], resources: ["csiaddonsnodes"], namespace: NAMESPACE });
  return user;
}

const healthAs = (name: string) => call(client, client.getVolumeHealth, { pvName: "pv-a" }, { metadata: { authorization: `Bearer ${name}-token` } });

describe("auth flags", () => {
  before(async () => {
    kube = await startTestKube([pv("pv-a", { handle: "vol-a" }), volumeAttachment("pv-a", "vol-a")]);
    tls = await makeTlsFiles(tempDir());
    stub = await startDriverStub({ state: { volumes: { "vol-a": { state: "HEALTHY" } } } });
    sidecar = await startSidecarProc({
      driverSocket: stub.addonsSocket,
      kubeconfig: kube.kubeconfigPath,
      args: [
        ...authArgs(AUDIENCE, tls),
        `--auth-verb=${RULE.verb}`,
        `--auth-group=${RULE.group}`,
        `--auth-resource=${RULE.resource}`,
        `--auth-cache-ttl=${TTL_MS}ms`,
      ],
    });
    await waitFor("SERVING over TLS", async () => (await checkHealth(sidecar.address, tlsCredentials(tls), TLS_CLIENT_OPTIONS)) === "SERVING", {
      timeoutMs: 20_000,
    });
    client = new VolumeHealerClient(sidecar.address, tlsCredentials(tls), TLS_CLIENT_OPTIONS);
  });

  after(async () => {
    client?.close();
    await sidecar?.stop();
    await stub?.stop();
    await kube?.stop();
  });

  test("custom --auth-verb/--auth-group/--auth-resource: the access review asks exactly that rule (the family as its subresource)", async () => {
    caller("custom-caller", "custom");
    caller("default-caller", "default");
    const ok = await healthAs("custom-caller");
    assert.ok(ok.ok, JSON.stringify(ok));
    const denied = await healthAs("default-caller");
    assert.equal(codeName((denied as { code: number }).code), "PERMISSION_DENIED");
    assert.match((denied as { details: string }).details, /may not heal volumes\/heal \(API group healer\.example\.com\) in namespace csi/);
  });

  test("--auth-cache-ttl: a revoked permission is denied once the cached decision expires, not before", async () => {
    const user = caller("revoked-caller", "custom");
    const sent = Date.now();
    assert.ok((await healthAs("revoked-caller")).ok);
    const revoked = Date.now();
    kube.auth.clearRules(user);
    // Still inside the TTL of the decision (made after `sent`), the cached "allowed" is used.
    const cached = await healthAs("revoked-caller");
    if (Date.now() < sent + TTL_MS - 200) assert.ok(cached.ok, `cached decision used within the TTL: ${JSON.stringify(cached)}`);
    const deniedAt = await waitFor(
      "the revocation to take effect",
      async () => {
        const r = await healthAs("revoked-caller");
        return !r.ok && r.code === 7 ? Date.now() : undefined;
      },
      { timeoutMs: TTL_MS + 15_000, intervalMs: 100 },
    );
    assert.ok(deniedAt >= sent + TTL_MS, `denied ${deniedAt - sent} ms after the allowed call, within the ${TTL_MS} ms TTL`);
    assert.ok(deniedAt - revoked < TTL_MS + 10_000);
  });
});
