// Swapping the upstream sidecar image for ours in an existing DaemonSet or Deployment: the
// container's argument list stays as it is. These run the sidecar with exactly the arguments
// those manifests give the upstream sidecar (after the kubelet expands $(VAR)), in-cluster style
// (no flag of ours; only KUBECONFIG in the environment), and check that it starts, serves the
// upstream controller's connect, and names each ignored flag in exactly one warning line.
//
// The argument lists are the csi-addons container of Rook's Ceph-CSI node-plugin DaemonSet and of
// its provisioner Deployment (the upstream project's own examples of the sidecar in a driver's
// pods): sidecar/main.go in csi-addons/kubernetes-csi-addons defines every flag they use.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { connect as tlsConnect, type ConnectionOptions } from "node:tls";
import { KUBE_API_AUDIENCE, type KubeApi } from "../../kube/index.js";
import { IGNORED_FLAGS } from "../../../sidecar/config/upstream.js";
import { UPSTREAM_FAMILIES } from "../../../sidecar/auth/families.js";
import { startTestKube } from "../../support/cluster.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { parseLines } from "../../support/sidecar.js";
import { type Proc, startProgram } from "../../support/proc.js";
import { codeName } from "../../support/grpc.js";
import { waitFor } from "../../support/wait.js";
import { upstreamConnect } from "../../support/upstream-controller.js";
import { NAMESPACE, NODE, POD, POD_UID } from "../../support/fixtures.js";

const CALLER = "system:serviceaccount:csi-addons-system:csi-addons-controller-manager";
const TOKEN = "upstream-controller-token-0b1c2d3e";
const IGNORED = "upstream sidecar flag accepted and ignored";

/** The node plugin's csi-addons container (DaemonSet). */
const daemonSetArgs = (socket: string, port: number) => [
  `--node-id=${NODE}`,
  "--v=5",
  `--pod=${POD}`,
  `--namespace=${NAMESPACE}`,
  `--pod-uid=${POD_UID}`,
  "--stagingpath=/var/lib/kubelet/plugins/kubernetes.io/csi/",
  `--csi-addons-address=unix://${socket}`,
  `--controller-port=${port}`,
];

/** The provisioner's csi-addons container (Deployment): the same plus the leader election. */
const deploymentArgs = (socket: string, port: number) => [
  `--node-id=${NODE}`,
  "--v=5",
  `--csi-addons-address=unix://${socket}`,
  `--controller-port=${port}`,
  `--pod=${POD}`,
  `--namespace=${NAMESPACE}`,
  `--pod-uid=${POD_UID}`,
  `--leader-election-namespace=${NAMESPACE}`,
  "--leader-election-lease-duration=15s",
  "--leader-election-renew-deadline=10s",
  "--leader-election-retry-period=2s",
];

/** A port nothing listens on now (the manifests fix --controller-port; tests run in parallel). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

let kube: KubeApi;
let stub: DriverStub;

async function startExact(args: string[]): Promise<Proc> {
  const proc = startProgram("sidecar", args, { env: { KUBECONFIG: kube.kubeconfigPath } });
  await proc.waitForOutput('"message":"sidecar started"', 30_000);
  return proc;
}

/** GetCapabilities the upstream controller's way, once the driver is connected. */
async function upstreamGetsCapabilities(port: number): Promise<void> {
  const r = await waitFor(
    "GetCapabilities through the sidecar",
    async () => {
      const o = await upstreamConnect(`127.0.0.1:${port}`, TOKEN, 5_000);
      return o.ok || codeName(o.code) !== "UNAVAILABLE" ? o : undefined;
    },
    { timeoutMs: 20_000 },
  );
  assert.ok(r.ok, `${codeName((r as { code: number }).code)}: ${(r as { details: string }).details}`);
  assert.ok(r.value.capabilities.length > 0);
}

const startLine = (proc: Proc) => parseLines(proc.stdout()).find((l) => l["message"] === "starting csi-addons-sidecar")!;
const warnings = (proc: Proc) => parseLines(proc.stdout()).filter((l) => l["message"] === IGNORED);

describe("the upstream sidecar's arguments, unchanged", () => {
  before(async () => {
    kube = await startTestKube();
    kube.auth.addToken(TOKEN, { username: CALLER, audiences: [KUBE_API_AUDIENCE] });
    // What components/upstream-controller-access grants: its families, not heal.
    kube.auth.allow(CALLER, { verbs: ["call"], apiGroups: ["csiaddons.openshift.io"], resources: UPSTREAM_FAMILIES.map((f) => `csiaddonsnodes/${f}`) });
    stub = await startDriverStub({});
  });

  after(async () => {
    await stub?.stop();
    await kube?.stop();
  });

  for (const [what, argsOf] of [
    ["the node-plugin DaemonSet's", daemonSetArgs],
    ["the provisioner Deployment's", deploymentArgs],
  ] as const) {
    test(`${what}: starts, serves the upstream controller with TLS and auth on, logs at debug (-v=5), warns about nothing`, async () => {
      const port = await freePort();
      const proc = await startExact(argsOf(stub.addonsSocket, port));
      try {
        await upstreamGetsCapabilities(port);
        assert.equal(startLine(proc)["logLevel"], "debug", "-v=5 means debug logs");
        assert.deepEqual(warnings(proc), [], "every flag of these lists means something here");
        assert.equal(proc.stderr(), "");
      } finally {
        assert.equal(await proc.stop(10_000), 0);
      }
    });
  }

  test("every flag the upstream sidecar accepts and we do not use: accepted, one warning line naming each", async () => {
    const port = await freePort();
    const ignored = IGNORED_FLAGS.flatMap((f) => (f.kind === "bool" ? [`--${f.name}`] : [`--${f.name}`, "x"]));
    const proc = await startExact([...daemonSetArgs(stub.addonsSocket, port), ...ignored, "--logtostderr=true", "-v=0"]);
    try {
      await upstreamGetsCapabilities(port);
      const named = warnings(proc).map((l) => l["flag"]);
      assert.deepEqual([...named].sort(), IGNORED_FLAGS.map((f) => `--${f.name}`).sort(), "one warning per ignored flag, a repeated flag once");
      for (const w of warnings(proc)) assert.equal(w["level"], "warn");
      assert.equal(startLine(proc)["logLevel"], "info", "the last -v (0) wins, as in Go");
    } finally {
      assert.equal(await proc.stop(10_000), 0);
    }
  });
});

/** The TLS parameters a handshake with these client options settles on, or the error. */
function handshake(port: number, opts: ConnectionOptions): Promise<{ version: string; cipher: string; group?: string } | { error: string }> {
  return new Promise((resolve) => {
    const sock = tlsConnect({ host: "127.0.0.1", port, servername: "localhost", rejectUnauthorized: false, ALPNProtocols: ["h2"], ...opts }, () => {
      const r = { version: sock.getProtocol() ?? "", cipher: sock.getCipher().name, group: (sock.getEphemeralKeyInfo() as { name?: string } | null)?.name };
      sock.destroy();
      resolve(r);
    });
    sock.once("error", (e) => resolve({ error: e.message }));
    sock.setTimeout(5_000, () => {
      sock.destroy();
      resolve({ error: "no handshake within 5 s" });
    });
  });
}

describe("upstream TLS flags on the controller port", () => {
  let k: KubeApi;
  let s: DriverStub;
  before(async () => {
    k = await startTestKube();
    s = await startDriverStub({});
  });
  after(async () => {
    await s?.stop();
    await k?.stop();
  });

  test("--tls-min-version=VersionTLS12 --tls-cipher-suites --tls-curve-preferences: only that suite and that curve for TLS 1.2", async () => {
    const port = await freePort();
    const proc = startProgram(
      "sidecar",
      [
        ...daemonSetArgs(s.addonsSocket, port),
        "--tls-min-version=VersionTLS12",
        "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "--tls-curve-preferences=CurveP384",
      ],
      { env: { KUBECONFIG: k.kubeconfigPath } },
    );
    try {
      await proc.waitForOutput('"message":"sidecar started"', 30_000);
      const tls12 = { maxVersion: "TLSv1.2" } as const;
      const ok = await waitFor("a TLS 1.2 handshake", async () => {
        const r = await handshake(port, tls12);
        return "error" in r ? undefined : r;
      });
      assert.deepEqual(ok, { version: "TLSv1.2", cipher: "ECDHE-ECDSA-AES256-GCM-SHA384", group: "secp384r1" });
      assert.ok("error" in (await handshake(port, { ...tls12, ciphers: "ECDHE-ECDSA-AES128-GCM-SHA256" })), "another suite is refused");
      assert.ok("error" in (await handshake(port, { ...tls12, ecdhCurve: "P-256" })), "another curve is refused");
      // TLS 1.3 stays available, its suites untouched (Go does not let them be configured either).
      assert.equal(((await handshake(port, { ecdhCurve: "P-384" })) as { version: string }).version, "TLSv1.3");
    } finally {
      assert.equal(await proc.stop(10_000), 0);
    }
  });

  test("--tls-min-version=VersionTLS13: a TLS 1.2 client is refused", async () => {
    const port = await freePort();
    const proc = startProgram("sidecar", [...daemonSetArgs(s.addonsSocket, port), "--tls-min-version=VersionTLS13"], { env: { KUBECONFIG: k.kubeconfigPath } });
    try {
      await proc.waitForOutput('"message":"sidecar started"', 30_000);
      const r = await waitFor("a TLS 1.3 handshake", async () => {
        const h = await handshake(port, {});
        return "error" in h ? undefined : h;
      });
      assert.equal(r.version, "TLSv1.3");
      assert.ok("error" in (await handshake(port, { maxVersion: "TLSv1.2" })));
    } finally {
      assert.equal(await proc.stop(10_000), 0);
    }
  });
});
