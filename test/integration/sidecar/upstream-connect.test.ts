// The upstream csi-addons controller's connect, played exactly (internal/connection in
// csi-addons/kubernetes-csi-addons): gRPC over TLS without verifying the server's certificate, a
// unary interceptor that adds "authorization: Bearer <its own ServiceAccount token>" (a plain
// token, audience: the API server's) to every call, and GetCapabilities as the first call. The
// sidecar runs with the auth flags deploy/'s DaemonSet ships (the rest are the binary's defaults),
// as its own ServiceAccount with exactly deploy/'s RBAC, against an API server that enforces RBAC
// with the rules of deploy/components/upstream-controller-access. That controller gets through;
// the token of any other ServiceAccount — the sidecar's own, a random pod's — does not.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { KUBE_API_AUDIENCE, startKubeApi, type KubeApi } from "../../kube/index.js";
import { loadComponents } from "../../support/deploy/load.js";
import { grantsOf, installGrants } from "../../support/deploy/grants.js";
import { loadRbacRules } from "../../support/deploy/rbac.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import type { SidecarProc } from "../../support/sidecar.js";
import { codeName } from "../../support/grpc.js";
import { UPSTREAM_USER, addUpstreamToken, shippedAuthFlags, startShippedSidecar, upstreamConnect } from "../../support/upstream-controller.js";
import { waitFor } from "../../support/wait.js";
import { baseObjects, upstreamCrdFile } from "../../support/fixtures.js";

const RANDOM_USER = "system:serviceaccount:default:default";
const TOKENS = {
  upstream: "upstream-controller-token-4f1e2d3c",
  sidecar: "sidecar-sa-token-7a6b5c4d",
  random: "random-pod-token-1a2b3c4d",
};

describe("the upstream csi-addons controller against deploy/'s settings", () => {
  let kube: KubeApi;
  let stub: DriverStub;
  let sidecar: SidecarProc;

  before(async () => {
    kube = await startKubeApi({ tls: true, requireRbac: true, crdFiles: [upstreamCrdFile], seed: baseObjects() });
    addUpstreamToken(kube, TOKENS.upstream);
    kube.auth.addToken(TOKENS.random, {
      username: RANDOM_USER,
      groups: ["system:serviceaccounts", "system:serviceaccounts:default"],
      audiences: [KUBE_API_AUDIENCE],
    });
    // The component binds the ClusterRole that components/controller defines.
    installGrants(
      kube,
      grantsOf(loadComponents("controller", "upstream-controller-access")).filter((g) => g.user === UPSTREAM_USER),
    );
    stub = await startDriverStub({});
    sidecar = await startShippedSidecar(kube, TOKENS.sidecar, stub.addonsSocket);
  });

  after(async () => {
    const out = sidecar ? sidecar.proc.stdout() + sidecar.proc.stderr() : "";
    await sidecar?.stop();
    await stub?.stop();
    await kube?.stop();
    for (const t of Object.values(TOKENS)) assert.ok(!out.includes(t), "no token in the sidecar's output");
  });

  test("deploy/ ships caller authentication on", () => {
    const flags = shippedAuthFlags();
    assert.ok(flags.includes("--enable-auth=true") || !flags.some((f) => f.startsWith("--enable-auth")), flags.join(" "));
  });

  test("its connect (TLS without verification, its own token, GetCapabilities) gets the driver's capabilities", async () => {
    const r = await waitFor(
      "GetCapabilities through the sidecar",
      async () => {
        const o = await upstreamConnect(sidecar.address, TOKENS.upstream);
        // UNAVAILABLE until the driver is connected; anything else is the answer.
        return o.ok || codeName(o.code) !== "UNAVAILABLE" ? o : undefined;
      },
      { timeoutMs: 20_000 },
    );
    assert.ok(r.ok, `${codeName((r as { code: grpc.status }).code)}: ${(r as { details: string }).details}`);
    const services = r.value.capabilities.flatMap((c) => (c.type?.$case === "service" ? [c.type.service.type] : []));
    assert.ok(services.length > 0, JSON.stringify(r.value));
    assert.ok(kube.counters.get("create", "tokenreviews") >= 1 && kube.counters.get("create", "subjectaccessreviews") >= 1);
  });

  for (const [who, token] of [
    ["the sidecar's own ServiceAccount", TOKENS.sidecar],
    ["a random pod's ServiceAccount", TOKENS.random],
  ] as const) {
    test(`the same connect with the token of ${who} → PERMISSION_DENIED`, async () => {
      const r = await upstreamConnect(sidecar.address, token);
      assert.equal(r.ok, false);
      assert.equal(codeName((r as { code: grpc.status }).code), "PERMISSION_DENIED", (r as { details: string }).details);
    });
  }

  test("no ServiceAccount of the sidecar holds the callers' permission", () => {
    const own = loadRbacRules();
    for (const r of [...own.namespaced, ...own.cluster]) {
      const coversNodes = r.resources.some((x) => x === "csiaddonsnodes" || x === "*");
      assert.ok(!(coversNodes && r.verbs.some((v) => v === "call" || v === "*")), `the sidecar's RBAC grants ${JSON.stringify(r)}`);
    }
  });
});
