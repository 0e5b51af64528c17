// Who may call (DESIGN 4.6): TLS on the controller port, a TokenReview for our audience or the
// API server's (@api-server), a SubjectAccessReview for "call csiaddonsnodes/heal" — a permission the
// sidecar's own ServiceAccount does not hold; health stays open. The main sidecar runs with the
// binary's defaults (no audience or verb flags), as a drop-in replacement of the upstream one would.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { X509Certificate } from "node:crypto";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { generate } from "selfsigned";
import { service as healthService } from "grpc-health-check";
import { KUBE_API_AUDIENCE, type KubeApi } from "../../kube/index.js";
import { loadRbacRules } from "../../support/deploy/rbac.js";
import { SIDECAR_USER, sidecarAccount } from "../../support/upstream-controller.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { call, codeName } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { servedCertificate } from "../../support/secure-sidecar.js";
import { NAMESPACE, pv, volumeAttachment } from "../../support/fixtures.js";
import { VolumeHealerClient } from "../../../proto/gen/sidecar/v1/healer.js";
import { nodeAudience } from "../../../common/auth/audience.js";

const AUDIENCE = "csi-addons-healer";
/** The audience the main sidecar accepts by default (@node): its node's, node-1. */
const NODE_AUD = nodeAudience("node-1");
/** The extra key of a scoped token's scopes (as OpenShift's scoped tokens carry them). */
const SCOPES = "scopes.authorization.openshift.io";
const HEALER_USER = "system:serviceaccount:csi-addons-healer:healer-controller";
const UPSTREAM_USER = "system:serviceaccount:csi-addons-system:csi-addons-controller-manager";
const CSIADDONS = "csiaddons.openshift.io";
const HealthClient = grpc.makeClientConstructor(healthService as grpc.ServiceDefinition, "grpc.health.v1.Health");

let kube: KubeApi;
let stub: DriverStub;
let sidecar: SidecarProc;
let caPem: string;

function tlsCreds(): grpc.ChannelCredentials {
  return grpc.credentials.createSsl(Buffer.from(caPem));
}
const TLS_OPTS = { "grpc.ssl_target_name_override": "localhost", "grpc.default_authority": "localhost" };

function healer(creds = tlsCreds()) {
  return new VolumeHealerClient(sidecar.address, creds, TLS_OPTS);
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe("caller authentication and authorization", () => {
  before(async () => {
    kube = await startTestKube([pv("pv-a", { handle: "vol-a" }), volumeAttachment("pv-a", "vol-a")]);
    kube.auth.addToken("good-token", { username: HEALER_USER, groups: ["system:serviceaccounts"], audiences: [NODE_AUD] });
    kube.auth.addToken("other-audience-token", { username: HEALER_USER, audiences: ["https://kubernetes.default.svc"] });
    kube.auth.addToken("expired-token", { username: HEALER_USER, audiences: [NODE_AUD], expired: true });
    kube.auth.addToken("bob-token", { username: "bob", audiences: [NODE_AUD] });
    kube.auth.addToken("updater-token", { username: "updater", audiences: [NODE_AUD] });
    // Scoped tokens of one user: an authorizer that reads the token's extra allows heal to one scope only.
    kube.auth.addToken("scoped-heal-token", { username: "scoped", audiences: [NODE_AUD], extra: { [SCOPES]: ["heal"] } });
    kube.auth.addToken("scoped-read-token", { username: "scoped", audiences: [NODE_AUD], extra: { [SCOPES]: ["read"] } });
    kube.auth.allow("scoped", {
      verbs: ["call"],
      apiGroups: [CSIADDONS],
      resources: ["csiaddonsnodes/heal"],
      namespace: NAMESPACE,
      extra: { [SCOPES]: "heal" },
    });
    // The audience every sidecar accepted before per-node tokens: no longer this node's.
    kube.auth.addToken("shared-audience-token", { username: HEALER_USER, audiences: [AUDIENCE] });
    kube.auth.addToken("upstream-token", { username: UPSTREAM_USER, groups: ["system:serviceaccounts"], audiences: [KUBE_API_AUDIENCE] });
    kube.auth.allow(HEALER_USER, { verbs: ["call"], apiGroups: [CSIADDONS], resources: ["csiaddonsnodes/heal"], namespace: NAMESPACE });
    kube.auth.allow(UPSTREAM_USER, { verbs: ["call"], apiGroups: [CSIADDONS], resources: ["csiaddonsnodes/heal"] });
    // The old default permission, which every sidecar holds: no longer enough.
    kube.auth.allow("updater", { verbs: ["get", "update"], apiGroups: [CSIADDONS], resources: ["csiaddonsnodes"], namespace: NAMESPACE });
    // The sidecar's own ServiceAccount with exactly what deploy/ grants it.
    sidecarAccount(kube, "sidecar-sa-token", loadRbacRules());
    const dir = tempDir();
    const pems = await generate([{ name: "commonName", value: "localhost" }], { keyType: "ec", curve: "P-256" });
    caPem = pems.cert;
    writeFileSync(join(dir, "tls.crt"), pems.cert);
    writeFileSync(join(dir, "tls.key"), pems.private);
    stub = await startDriverStub({ dir, state: { volumes: { "vol-a": { state: "HEALTHY" } } } });
    sidecar = await startSidecarProc({
      driverSocket: join(dir, "addons.sock"),
      kubeconfig: kube.kubeconfigPath,
      args: ["--enable-auth=true", `--tls-cert-file=${join(dir, "tls.crt")}`, `--tls-key-file=${join(dir, "tls.key")}`],
    });
    await waitFor(
      "SERVING over TLS",
      async () => {
        const c = new HealthClient(sidecar.address, tlsCreds(), TLS_OPTS);
        const st = await new Promise<string>((resolve) =>
          (c as any).check({ service: "" }, { deadline: Date.now() + 2000 }, (e: Error | null, r: { status: string }) => resolve(e ? "" : r.status)),
        );
        c.close();
        return st === "SERVING";
      },
      { timeoutMs: 20_000 },
    );
  });

  after(async () => {
    try {
      assert.deepEqual(stub.csiCalls(), []);
      const logs = sidecar.proc.stdout();
      for (const t of ["good-token", "bob-token", "other-audience-token", "upstream-token", "sidecar-sa-token"])
        assert.ok(!logs.includes(t), `token ${t} never logged`);
    } finally {
      await sidecar?.stop();
      await stub?.stop();
      await kube?.stop();
    }
  });

  const cases: { name: string; md: Record<string, string>; code: keyof typeof grpc.status; details: RegExp }[] = [
    { name: "no token", md: {}, code: "UNAUTHENTICATED", details: /missing bearer token/ },
    { name: "not a bearer header", md: { authorization: "Basic dXNlcjpwYXNz" }, code: "UNAUTHENTICATED", details: /missing bearer token/ },
    { name: "unknown token", md: bearer("garbage"), code: "UNAUTHENTICATED", details: /not valid for audience csi-addons-healer\/node-1 or the API server's/ },
    {
      name: "the shared audience csi-addons-healer (not this node's)",
      md: bearer("shared-audience-token"),
      code: "UNAUTHENTICATED",
      details: /not valid for audience/,
    },
    { name: "wrong audience", md: bearer("other-audience-token"), code: "UNAUTHENTICATED", details: /not valid for audience/ },
    { name: "expired token", md: bearer("expired-token"), code: "UNAUTHENTICATED", details: /not valid/ },
    {
      name: "valid but not allowed",
      md: bearer("bob-token"),
      code: "PERMISSION_DENIED",
      details: /user bob may not call csiaddonsnodes\/heal \(API group csiaddons\.openshift\.io\) in namespace csi/,
    },
    {
      name: "a scoped token whose scope does not allow it (its user's other token would be)",
      md: bearer("scoped-read-token"),
      code: "PERMISSION_DENIED",
      details: /user scoped may not call csiaddonsnodes\/heal/,
    },
    {
      name: "the old default permission (update csiaddonsnodes)",
      md: bearer("updater-token"),
      code: "PERMISSION_DENIED",
      details: /user updater may not call/,
    },
    {
      name: "the sidecar's own ServiceAccount (deploy/'s RBAC, API-server audience)",
      md: bearer("sidecar-sa-token"),
      code: "PERMISSION_DENIED",
      details: new RegExp(`user ${SIDECAR_USER} may not call`),
    },
  ];
  for (const c of cases) {
    test(`${c.name} → ${c.code}, driver not called`, async () => {
      const before = stub.calls({ method: "NodeGetVolumeHealth" }).length;
      const client = healer();
      const r = await call(client, client.getVolumeHealth, { pvName: "pv-a" }, { metadata: c.md });
      client.close();
      assert.equal(r.ok, false);
      assert.equal(codeName((r as any).code), c.code, (r as any).details);
      assert.match((r as any).details, c.details);
      assert.equal(stub.calls({ method: "NodeGetVolumeHealth" }).length, before);
    });
  }

  test("a scoped token is judged with its extra: the SubjectAccessReview carries it, and the scope that allows heal gets through", async () => {
    const client = healer();
    const r = await call(client, client.getVolumeHealth, { pvName: "pv-a" }, { metadata: bearer("scoped-heal-token") });
    client.close();
    assert.ok(r.ok, JSON.stringify(r));
  });

  test("allowed caller: the call works; decisions are cached", async () => {
    const client = healer();
    kube.counters.reset();
    for (let i = 0; i < 3; i++) {
      const r = await call(client, client.getVolumeHealth, { pvName: "pv-a" }, { metadata: bearer("good-token") });
      assert.ok(r.ok, JSON.stringify(r));
      assert.equal(r.value.volumeId, "vol-a");
    }
    client.close();
    assert.equal(kube.counters.get("create", "tokenreviews"), 1);
    assert.equal(kube.counters.get("create", "subjectaccessreviews"), 1);
  });

  test('a caller with "call" whose token carries the API server\'s audience gets through (@api-server is in the defaults)', async () => {
    const client = healer();
    const r = await call(client, client.getVolumeHealth, { pvName: "pv-a" }, { metadata: bearer("upstream-token") });
    client.close();
    assert.ok(r.ok, JSON.stringify(r));
  });

  test("identity pass-through also needs a token", async () => {
    const client = new grpc.Client(sidecar.address, tlsCreds(), TLS_OPTS);
    const raw = (md: grpc.Metadata) =>
      new Promise<grpc.ServiceError | null>((resolve) =>
        client.makeUnaryRequest(
          "/identity.Identity/GetIdentity",
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(0),
          md,
          { deadline: Date.now() + 5000 },
          (e) => resolve(e),
        ),
      );
    assert.equal((await raw(new grpc.Metadata()))?.code, grpc.status.UNAUTHENTICATED);
    const md = new grpc.Metadata();
    md.set("authorization", "Bearer good-token");
    assert.equal(await raw(md), null);
    client.close();
  });

  test("health checks need no token", async () => {
    const c = new HealthClient(sidecar.address, tlsCreds(), TLS_OPTS);
    const st = await new Promise<string>((resolve, reject) =>
      (c as any).check({ service: "sidecar.v1.VolumeHealer" }, { deadline: Date.now() + 5000 }, (e: Error | null, r: { status: string }) =>
        e ? reject(e) : resolve(r.status),
      ),
    );
    c.close();
    assert.equal(st, "SERVING");
  });

  test("TLS is really negotiated: a plaintext client fails", async () => {
    const client = healer(grpc.credentials.createInsecure());
    const r = await call(client, client.getVolumeHealth, { pvName: "pv-a" }, { metadata: bearer("good-token"), deadlineMs: 3000 });
    client.close();
    assert.equal(r.ok, false);
    assert.ok(["UNAVAILABLE", "DEADLINE_EXCEEDED"].includes(codeName((r as any).code)), codeName((r as any).code));
  });
});

describe("--auth-audience without @api-server", () => {
  test('a token with the API server\'s audience is UNAUTHENTICATED even for a caller with "call"; our audience still works', async () => {
    const k = await startTestKube([pv("pv-a", { handle: "vol-a" }), volumeAttachment("pv-a", "vol-a")]);
    k.auth.addToken("upstream-token", { username: UPSTREAM_USER, audiences: [KUBE_API_AUDIENCE] });
    k.auth.addToken("good-token", { username: HEALER_USER, audiences: [AUDIENCE] });
    for (const u of [UPSTREAM_USER, HEALER_USER]) k.auth.allow(u, { verbs: ["call"], apiGroups: [CSIADDONS], resources: ["csiaddonsnodes/heal"] });
    const dir = tempDir();
    const s = await startDriverStub({ dir, state: { volumes: { "vol-a": { state: "HEALTHY" } } } });
    const sc = await startSidecarProc({
      driverSocket: join(dir, "addons.sock"),
      kubeconfig: k.kubeconfigPath,
      args: ["--enable-auth=true", `--auth-audience=${AUDIENCE}`],
    });
    const insecureTls = grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false });
    const client = new VolumeHealerClient(sc.address, insecureTls);
    try {
      const ask = (token: string) => call(client, client.getVolumeHealth, { pvName: "pv-a" }, { metadata: bearer(token) });
      const ours = await waitFor("our audience accepted once SERVING", async () => {
        const r = await ask("good-token");
        return r.ok || codeName((r as any).code) !== "UNAVAILABLE" ? r : undefined;
      });
      assert.ok(ours.ok, JSON.stringify(ours));
      const theirs = await ask("upstream-token");
      assert.equal(theirs.ok, false);
      assert.equal(codeName((theirs as any).code), "UNAUTHENTICATED");
      assert.match((theirs as any).details, /not valid for audience csi-addons-healer$/);
      assert.equal(k.counters.get("create", "subjectaccessreviews"), 1, "no SubjectAccessReview for an unauthenticated token");
    } finally {
      client.close();
      await sc.stop();
      await s.stop();
      await k.stop();
    }
  });
});

describe("TLS without certificate files", () => {
  test("a self-signed pair is generated; TLS clients connect, plaintext ones do not", async () => {
    const k = await startTestKube();
    const dir = tempDir();
    const s = await startDriverStub({ dir });
    const sc = await startSidecarProc({
      driverSocket: join(dir, "addons.sock"),
      kubeconfig: k.kubeconfigPath,
      args: ["--enable-auth=true", `--auth-audience=${AUDIENCE}`],
    });
    try {
      const check = (creds: grpc.ChannelCredentials) =>
        new Promise<string>((resolve) => {
          const c = new HealthClient(sc.address, creds);
          (c as any).check({ service: "" }, { deadline: Date.now() + 3000 }, (e: grpc.ServiceError | null, r: { status: string }) => {
            c.close();
            resolve(e ? codeName(e.code) : r.status);
          });
        });
      const insecureTls = grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false });
      await waitFor("SERVING over self-signed TLS", async () => (await check(insecureTls)) === "SERVING");
      assert.notEqual(await check(grpc.credentials.createInsecure()), "SERVING");
    } finally {
      await sc.stop();
      await s.stop();
      await k.stop();
    }
  });
});

/** The SHA-256 fingerprint of the certificate the port serves right now. */
const servedFingerprint = async (port: number) => (await servedCertificate(port)).fingerprint256;

describe("TLS certificate files", () => {
  test("missing files: self-signed until they appear, then the files' certificate, re-read when it changes", async () => {
    const k = await startTestKube();
    const dir = tempDir();
    const s = await startDriverStub({ dir });
    const cert = join(dir, "tls.crt");
    const key = join(dir, "tls.key");
    const sc = await startSidecarProc({
      driverSocket: join(dir, "addons.sock"),
      kubeconfig: k.kubeconfigPath,
      args: ["--enable-auth=true", `--auth-audience=${AUDIENCE}`, `--tls-cert-file=${cert}`, `--tls-key-file=${key}`],
    });
    try {
      const selfSigned = await waitFor("a TLS handshake", () => servedFingerprint(sc.port));
      await sc.proc.waitForOutput("TLS certificate files not usable; serving a self-signed certificate");
      const write = async () => {
        const pems = await generate([{ name: "commonName", value: "localhost" }], { keyType: "ec", curve: "P-256" });
        writeFileSync(key, pems.private);
        writeFileSync(cert, pems.cert);
        return new X509Certificate(pems.cert).fingerprint256;
      };
      const first = await write();
      assert.notEqual(first, selfSigned);
      await waitFor("the files' certificate served", async () => (await servedFingerprint(sc.port)) === first, { timeoutMs: 25_000 });
      const second = await write();
      await waitFor("the rotated certificate served", async () => (await servedFingerprint(sc.port)) === second, { timeoutMs: 25_000 });
      // A rotation caught half-way (a new key beside the old certificate) must not replace a good pair.
      const kept = sc.proc.stdout().split("keeping the current certificate").length;
      const other = await generate([{ name: "commonName", value: "localhost" }], { keyType: "ec", curve: "P-256" });
      writeFileSync(key, other.private);
      await waitFor("the mismatched pair noticed", () => sc.proc.stdout().split("keeping the current certificate").length > kept, { timeoutMs: 25_000 });
      assert.equal(await servedFingerprint(sc.port), second);
    } finally {
      await sc.stop();
      await s.stop();
      await k.stop();
    }
  });
});
