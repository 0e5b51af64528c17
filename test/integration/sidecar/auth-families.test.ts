// Authorization per service (least authority): with deploy/'s roles loaded into the in-memory API, a real
// sidecar (auth on, its defaults) lets our healer controller (csiaddonsnodes/heal) heal and refuses
// it fence and replication with PERMISSION_DENIED; the upstream controller's role
// (components/upstream-controller-access) reaches its five families and not heal unless granted;
// identity needs authentication only; --auth-weaker-single-permission restores the one check.
// And base/'s node-plugin ServiceAccount holds no Lease permission.
import { after, before, describe, test } from "node:test";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import type { KubeApi } from "../../kube/index.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import { NAMESPACE, pv, volumeAttachment } from "../../support/fixtures.js";
import { UPSTREAM_USER, addUpstreamToken } from "../../support/upstream-controller.js";
import { grantsOf, installGrants } from "../../support/deploy/grants.js";
import { loadComponents, noKubectl, render } from "../../support/deploy/load.js";
import { HEALER_USER, TLS_CLIENT_OPTIONS, makeTlsFiles, tlsCredentials, type TlsFiles } from "../../support/secure-sidecar.js";
import { nodeAudience } from "../../../common/auth/audience.js";

const METHODS = {
  heal: "/sidecar.v1.VolumeHealer/GetVolumeHealth",
  networkfence: "/proto.NetworkFence/FenceClusterNetwork",
  replication: "/proto.Replication/EnableVolumeReplication",
  reclaimspace: "/proto.ReclaimSpace/NodeReclaimSpace",
  encryptionkeyrotation: "/proto.EncryptionKeyRotation/EncryptionKeyRotate",
  volumegroup: "/proto.VolumeGroupController/CreateVolumeGroup",
  identity: "/identity.Identity/GetCapabilities",
} as const;
const CONTROLLER_SA = "system:serviceaccount:csi-addons-healer:csi-addons-healer-controller";
const execFileAsync = promisify(execFile);
const NODE_PLUGIN_SA = "system:serviceaccount:csi-addons-healer:csi-addons-healer";

let kube: KubeApi;
let stub: DriverStub;
let tls: TlsFiles;
const sidecars: SidecarProc[] = [];

/** The gRPC status code of one call with an empty request, as `token`: auth answers before any handler. */
async function codeOf(address: string, method: string, token: string): Promise<string> {
  const client = new grpc.Client(address, tlsCredentials(tls), TLS_CLIENT_OPTIONS);
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  try {
    const err = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest(
        method,
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.alloc(0),
        md,
        { deadline: Date.now() + 10_000 },
        (e) => resolve(e),
      ),
    );
    return err ? grpc.status[err.code] : "OK";
  } finally {
    client.close();
  }
}
const refusedByAuth = (code: string) => code === "PERMISSION_DENIED" || code === "UNAUTHENTICATED";

async function startSidecar(extra: string[] = []): Promise<SidecarProc> {
  const s = await startSidecarProc({
    driverSocket: stub.addonsSocket,
    kubeconfig: kube.kubeconfigPath,
    args: ["--enable-auth=true", `--tls-cert-file=${tls.certFile}`, `--tls-key-file=${tls.keyFile}`, ...extra],
  });
  sidecars.push(s);
  await waitFor("the sidecar to answer", async () => (await codeOf(s.address, METHODS.identity, "warm-up")) === "UNAUTHENTICATED", { timeoutMs: 30_000 });
  return s;
}

describe("authorization per service family, with deploy/'s roles", { skip: noKubectl }, () => {
  before(async () => {
    kube = await startTestKube([pv("pv-a", { handle: "vol-a" }), volumeAttachment("pv-a", "vol-a")]);
    tls = await makeTlsFiles(tempDir("auth-families-"));
    stub = await startDriverStub({ state: { volumes: { "vol-a": { state: "HEALTHY" } } } });
    // Our controller and the upstream one, exactly as the components bind them (their namespace is deploy/'s).
    installGrants(
      kube,
      grantsOf(loadComponents("controller", "upstream-controller-access")).filter((g) => g.user === CONTROLLER_SA || g.user === UPSTREAM_USER),
    );
    kube.auth.addToken("controller-token", { username: CONTROLLER_SA, groups: ["system:serviceaccounts"], audiences: [nodeAudience("node-1")] });
    addUpstreamToken(kube, "upstream-token");
  });
  after(async () => {
    for (const s of sidecars) await s.stop();
    await stub?.stop();
    await kube?.stop();
  });

  test("our controller (csiaddonsnodes/heal) heals; fence, replication and the other families → PERMISSION_DENIED", async () => {
    const s = sidecars[0] ?? (await startSidecar());
    // An empty request: past auth, the handler refuses it (INVALID_ARGUMENT, no pv_name).
    assert.equal(await codeOf(s.address, METHODS.heal, "controller-token"), "INVALID_ARGUMENT");
    assert.equal(await codeOf(s.address, METHODS.identity, "controller-token"), "OK");
    for (const f of ["networkfence", "replication", "reclaimspace", "encryptionkeyrotation", "volumegroup"] as const) {
      assert.equal(await codeOf(s.address, METHODS[f], "controller-token"), "PERMISSION_DENIED", f);
    }
  });

  test("the upstream controller's role reaches its five families and identity, not heal unless granted", async () => {
    const s = sidecars[0] ?? (await startSidecar());
    for (const f of ["networkfence", "replication", "reclaimspace", "encryptionkeyrotation", "volumegroup", "identity"] as const) {
      const code = await codeOf(s.address, METHODS[f], "upstream-token");
      assert.ok(!refusedByAuth(code), `${f}: ${code}`);
    }
    assert.equal(await codeOf(s.address, METHODS.heal, "upstream-token"), "PERMISSION_DENIED");
    kube.auth.allow(UPSTREAM_USER, { verbs: ["call"], apiGroups: ["csiaddons.openshift.io"], resources: ["csiaddonsnodes/heal"], namespace: NAMESPACE });
    try {
      // Decisions are cached (--auth-cache-ttl, 30 s): a new sidecar asks afresh.
      const fresh = await startSidecar();
      assert.equal(await codeOf(fresh.address, METHODS.heal, "upstream-token"), "INVALID_ARGUMENT");
    } finally {
      kube.auth.clearRules(UPSTREAM_USER);
      installGrants(kube, grantsOf(loadComponents("upstream-controller-access")));
    }
  });

  test("--auth-weaker-single-permission: one check (call csiaddonsnodes) for every service, as before", async () => {
    kube.auth.addToken("old-caller-token", { username: HEALER_USER, audiences: [nodeAudience("node-1")] });
    kube.auth.allow(HEALER_USER, { verbs: ["call"], apiGroups: ["csiaddons.openshift.io"], resources: ["csiaddonsnodes"], namespace: NAMESPACE });
    const single = await startSidecar(["--auth-weaker-single-permission"]);
    for (const m of Object.values(METHODS)) assert.ok(!refusedByAuth(await codeOf(single.address, m, "old-caller-token")), m);
    // Our controller's heal-only role does not hold the single permission.
    assert.equal(await codeOf(single.address, METHODS.heal, "controller-token"), "PERMISSION_DENIED");
    assert.ok(single.proc.stdout().includes("--auth-weaker-single-permission"), "the weaker choice is named in a warning");
    // The same caller, per service (the default), is refused every family: "csiaddonsnodes" covers no subresource.
    const s = sidecars[0]!;
    assert.equal(await codeOf(s.address, METHODS.heal, "old-caller-token"), "PERMISSION_DENIED");
  });

  test("kubectl auth can-i: base/'s node-plugin ServiceAccount may not create or update any Lease, nor call the sidecar; the controller-plugin example's may elect", async () => {
    const PLUGIN_SA = "system:serviceaccount:csi-addons-healer:csi-stub-controller-example";
    installGrants(kube, grantsOf([...render(""), ...render("examples/controller-plugin")].map((doc) => ({ file: "x", doc }))));
    // kubectl asks with a protobuf SelfSubjectAccessReview; the API server runs in this process, so
    // kubectl must run beside it (not spawnSync, which would stop the server answering).
    const canI = async (user: string, ...question: string[]) => {
      const token = `can-i-${user.split(":").pop()}`;
      kube.auth.addToken(token, { username: user, groups: ["system:serviceaccounts", "system:authenticated"] });
      const args = ["--kubeconfig", kube.writeKubeconfig(token, user), "auth", "can-i", ...question, "-n", "csi-addons-healer"];
      const { stdout, stderr } = await execFileAsync("kubectl", args, { timeout: 30_000 }).catch((e: { stdout?: string; stderr?: string }) => ({
        stdout: e.stdout ?? "",
        stderr: e.stderr ?? "",
      }));
      assert.ok(stdout.trim() === "yes" || stdout.trim() === "no", `kubectl auth can-i ${question.join(" ")}: ${stdout}${stderr}`);
      return stdout.trim();
    };
    for (const verb of ["create", "update"]) assert.equal(await canI(NODE_PLUGIN_SA, verb, "leases"), "no", `node plugin: ${verb} leases`);
    assert.equal(await canI(NODE_PLUGIN_SA, "call", "csiaddonsnodes", "--subresource=heal"), "no", "node plugin: call csiaddonsnodes/heal");
    for (const verb of ["get", "create", "update"]) assert.equal(await canI(PLUGIN_SA, verb, "leases"), "yes", `controller plugin: ${verb} leases`);
  });
});
