// DESIGN 7.3 / DESIGN 4.6: the controller verifies the sidecar's TLS certificate against
// --sidecar-ca-file (server name --sidecar-tls-server-name) and presents the bearer token from
// --token-file, re-read when the kubelet rotates it; the CA file is re-read when it is rotated. The sidecar runs with auth on and checks
// verb `call` on csiaddonsnodes/heal.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startControllerProc, waitLog, type ControllerProc } from "../../support/controller.js";
import { tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import { NAMESPACE } from "../../support/fixtures.js";
import { AUDIENCE, HEALER_USER, authArgs, makeTlsFiles, type TlsFiles } from "../../support/secure-sidecar.js";
import { startStack, type Stack } from "../../support/stack.js";

let stack: Stack;
let tls: TlsFiles;
let tokenFile: string;
const controllers: ControllerProc[] = [];
const dir = tempDir("ctl-tls-");

function writeToken(token: string): void {
  writeFileSync(`${tokenFile}.tmp`, token);
  renameSync(`${tokenFile}.tmp`, tokenFile);
}

before(async () => {
  tls = await makeTlsFiles(dir);
  tokenFile = join(dir, "token");
  stack = await startStack({
    volumes: { "pv-a": { state: "HEALTHY" }, "pv-b": { state: "HEALTHY" } },
    sidecarArgs: [...authArgs(AUDIENCE, tls), "--auth-verb=call", "--auth-cache-ttl=0"],
    tls,
  });
  stack.kube.auth.addToken("token-1", { username: HEALER_USER, groups: ["system:serviceaccounts"], audiences: [AUDIENCE] });
  stack.kube.auth.allow(HEALER_USER, { verbs: ["call"], apiGroups: ["csiaddons.openshift.io"], resources: ["csiaddonsnodes/heal"], namespace: NAMESPACE });
  writeToken("token-1");
  await stack.startSidecar();
});

after(async () => {
  for (const c of controllers) await c.stop();
  await stack?.stop();
});

const secureArgs = (caFile: string, token = tokenFile) => [
  "--sidecar-tls=true",
  `--sidecar-ca-file=${caFile}`,
  "--sidecar-tls-server-name=localhost",
  `--token-file=${token}`,
];

test("TLS verified against the CA, bearer token accepted; a rotated token is re-read", async () => {
  const c = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath, args: secureArgs(tls.certFile) });
  controllers.push(c);
  await stack.waitHandled();
  assert.deepEqual(
    c.heals({ trigger: "first-sight" }).map((l) => l.result),
    ["NOT_NEEDED", "NOT_NEEDED"],
  );

  // The kubelet rotates the projected token; the old one stops being valid.
  stack.kube.auth.addToken("token-2", { username: HEALER_USER, groups: ["system:serviceaccounts"], audiences: [AUDIENCE] });
  writeToken("token-2");
  stack.kube.auth.addToken("token-1", { username: HEALER_USER, audiences: [AUDIENCE], expired: true });
  await stack.crashDriver();
  await stack.waitHandled();
  assert.deepEqual(
    stack.pvs.map((pv) => stack.heals(pv)),
    [1, 1],
    "healed with the new token",
  );
  assert.deepEqual(
    c.heals({ trigger: "restart" }).map((l) => l.result),
    // A restart's heal makes the data path again, healthy or not.
    ["HEALED", "HEALED"],
  );
});

test("a sidecar whose certificate the CA does not verify is never called", async () => {
  const other = await makeTlsFiles(tempDir("ctl-other-ca-"));
  const c = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath, args: [...secureArgs(other.certFile), "--check-interval=300ms"] });
  controllers.push(c);
  const before = stack.stub.calls({ method: "NodeGetVolumeHealth" }).length;
  await waitFor("the controller to try the sidecar several times", () => c.logLines().filter((l) => l.message === "waiting for sidecar").length >= 3, {
    timeoutMs: 30_000,
  });
  await waitLog(c, { message: "waiting for sidecar" });
  const reason = String(c.logLines().find((l) => l.message === "waiting for sidecar")!["reason"]);
  assert.match(reason, /^unreachable at .*: UNAVAILABLE: .*certificate/i, "the log names the certificate, not a sidecar that is not SERVING");
  assert.match(await c.metrics(), /csi_addons_healer_sidecar_connections\{state="unreachable"\} 1/);
  assert.equal(c.heals().length, 0);
  assert.equal(stack.stub.calls({ method: "NodeGetVolumeHealth" }).length, before);
});

test("a rotated CA bundle is read again without a restart: a sidecar the old bundle did not verify is called once the file holds its CA", async () => {
  const other = await makeTlsFiles(tempDir("ctl-rotated-ca-"));
  const caFile = join(dir, "rotating-ca.crt");
  writeFileSync(caFile, other.caPem);
  const c = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath, args: [...secureArgs(caFile), "--check-interval=300ms"] });
  controllers.push(c);
  const refusedByCa = () => c.logLines().filter((l) => l.message === "waiting for sidecar" && /certificate/i.test(String(l["reason"]))).length;
  await waitFor("the controller to find the sidecar's certificate unverified", () => refusedByCa() >= 1, { timeoutMs: 30_000 });
  const checks = stack.stub.calls({ method: "NodeGetVolumeHealth" }).length;
  // The bundle rotated as a mounted ConfigMap is: the new file swapped in, the old CA gone.
  writeFileSync(`${caFile}.tmp`, tls.caPem);
  renameSync(`${caFile}.tmp`, caFile);
  await waitFor("the sidecar called under the rotated CA", () => stack.stub.calls({ method: "NodeGetVolumeHealth" }).length > checks, { timeoutMs: 30_000 });
  assert.match(await c.metrics(), /csi_addons_healer_sidecar_connections\{state="serving"\} 1/);
  await c.stop();
});

test("a token the sidecar refuses: nothing reaches the driver, the sidecar is counted as failing (not unresolved) and the log says why", async () => {
  const refused = join(dir, "refused-token");
  writeFileSync(refused, "token-nobody-issued");
  const args = [...secureArgs(tls.certFile, refused), "--check-interval=300ms"];
  const c = await startControllerProc({ kubeconfig: stack.kube.kubeconfigPath, args });
  controllers.push(c);
  const before = stack.stub.calls({ method: "NodeGetVolumeHealth" }).length;
  await waitFor("the sidecar counted as failing", async () => /csi_addons_healer_sidecar_connections\{state="failing"\} 1/.test(await c.metrics()), {
    timeoutMs: 30_000,
  });
  const reasons = c
    .logLines()
    .filter((l) => l.message === "waiting for sidecar")
    .map((l) => String(l["reason"]));
  assert.match(reasons[0] ?? "", /^SERVING at .*, but GetCapabilities failed: UNAUTHENTICATED/);
  assert.ok(!reasons.some((r) => r.includes("token-nobody-issued")), "the token itself is never logged");
  assert.equal(c.heals().length, 0);
  assert.equal(stack.stub.calls({ method: "NodeGetVolumeHealth" }).length, before);
});
