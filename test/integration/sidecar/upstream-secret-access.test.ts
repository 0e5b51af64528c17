// The named Secret of the upstream services when the API server will not hand it over: refused by
// RBAC (the sidecar's ServiceAccount may read only some Secrets here), or slow to answer while the
// caller's deadline runs out with one driver slot (--max-inflight=1) held by that call.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { RbacRules, Rule } from "../../support/deploy/rbac.js";
import { codeName, type Outcome } from "../../support/grpc.js";
import { secret } from "../../support/fixtures.js";
import { logged, upstreamFixture } from "../../support/upstream-harness.js";

const SECRET_VALUE = "AQD-locked-key-never-logged-5e2a";
const SECRETS = { userID: "csi-rbd-provisioner", userKey: SECRET_VALUE };
const OPS_NS = "storage-ops";
const READABLE = ["ceph-secret", "slow-secret"];
const named = { secretName: "ceph-secret", secretNamespace: OPS_NS };
const locked = { secretName: "locked-secret", secretNamespace: OPS_NS };
const code = (r: Outcome<unknown>) => (r.ok ? "OK" : codeName(r.code));
const details = (r: Outcome<unknown>) => (r.ok ? "" : r.details);

/** deploy/'s rules, but Secrets readable by name only: the others answer 403, as a narrowed RBAC would. */
function onlySomeSecrets(deployed: RbacRules): RbacRules {
  const narrow = (rules: Rule[]) =>
    rules.flatMap((r): Rule[] => {
      if (!r.resources.includes("secrets")) return [r];
      const rest = r.resources.filter((x) => x !== "secrets");
      return [...(rest.length ? [{ ...r, resources: rest }] : []), { verbs: ["get"], apiGroups: [""], resources: ["secrets"], resourceNames: READABLE }];
    });
  return { namespaced: narrow(deployed.namespaced), cluster: narrow(deployed.cluster) };
}

describe("upstream services whose named Secret the API server refuses or answers slowly", () => {
  const fx = upstreamFixture(
    [{ apiVersion: "v1", kind: "Namespace", metadata: { name: OPS_NS } }, ...[...READABLE, "locked-secret"].map((n) => secret(OPS_NS, n, SECRETS))],
    { capabilities: { networkFence: true, getClientsToFence: true, volumeReplication: true, volumeGroup: true } },
    ["--max-inflight=1"],
    { sidecarRules: onlySomeSecrets },
  );

  test("a Secret the sidecar may not read (403) is FAILED_PRECONDITION naming it, for fences, replication and groups; the driver is not called", async () => {
    const before = fx.stub.calls({ server: "addons" }).length;
    const outcomes = {
      fence: await fx.up.fenceClusterNetwork({ ...locked, cidrs: ["10.0.0.0/8"] }),
      clients: await fx.up.getFenceClients(locked),
      replication: await fx.up.enable({ ...locked, replicationSource: { type: { $case: "volume", volume: { volumeId: "vol-1" } } } }),
      group: await fx.up.createGroup({ ...locked, name: "g1" }),
    };
    for (const [what, r] of Object.entries(outcomes)) {
      assert.equal(code(r), "FAILED_PRECONDITION", `${what}: ${details(r)}`);
      assert.match(
        details(r),
        /^Kubernetes API: 403 Forbidden: secrets "locked-secret" is forbidden: .* \(the sidecar.s ServiceAccount lacks a grant\)$/,
        what,
      );
      assert.ok(!details(r).includes(SECRET_VALUE));
    }
    assert.equal(fx.stub.calls({ server: "addons" }).length, before);
    // The readable one works under the same rules: only the refusal is refused.
    assert.equal(code(await fx.up.fenceClusterNetwork({ ...named, cidrs: ["10.1.0.0/16"] })), "OK");
    assert.deepEqual(fx.driverCalls("/fence.FenceController/FenceClusterNetwork").at(-1)?.request.secrets, logged(SECRETS));
    const lines = fx.sidecar.logLines().filter((l) => l["secret"] === `${OPS_NS}/locked-secret`);
    assert.ok(lines.length >= 4, "each refused call is logged");
    assert.ok(!lines.some((l) => l["message"] === "call failed unexpectedly"), "a refusal is not an unexpected failure");
    assert.ok(!(fx.sidecar.proc.stdout() + fx.sidecar.proc.stderr()).includes(SECRET_VALUE), "no secret value in the sidecar's output");
  });

  test("a caller whose deadline passes while its Secret is being read frees its driver slot at once", async () => {
    const SLOW_MS = 4_000;
    fx.kube.faults.latency(SLOW_MS, { verb: "get", resource: "secrets", path: /\/secrets\/slow-secret$/ });
    try {
      const slow = await fx.up.fenceClusterNetwork({ secretName: "slow-secret", secretNamespace: OPS_NS, cidrs: ["10.2.0.0/16"] }, 300);
      assert.equal(code(slow), "DEADLINE_EXCEEDED", details(slow));
      // The only slot (--max-inflight=1) must be free again, not held until the slow read ends.
      const next = await fx.up.fenceClusterNetwork({ ...named, cidrs: ["10.3.0.0/16"] }, SLOW_MS / 2);
      assert.equal(code(next), "OK", details(next));
    } finally {
      fx.kube.faults.clear();
    }
    assert.ok(!fx.driverCalls("/fence.FenceController/FenceClusterNetwork").some((c) => c.request.cidrs?.[0]?.cidr === "10.2.0.0/16"));
  });
});
