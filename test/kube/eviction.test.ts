// pods/eviction as kube-apiserver's EvictionREST answers it: the pod's one PodDisruptionBudget must
// allow a disruption (429 with the real message and a DisruptionBudget cause when it allows none,
// or when its status lags its spec; 500 for two), an allowed eviction takes one from
// disruptionsAllowed and records the pod, a pod not running ignores budgets, and RBAC asks for
// create on pods/eviction, never delete on pods.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { KubeApi } from "./server.js";
import { type Clients, clients, failure, kubeSuite } from "./testkit.js";

let api: KubeApi;
let admin: Clients;
kubeSuite({ requireRbac: true, seed: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } }] }, async (k) => {
  ({ api, c: admin } = k);
});

const pod = (name: string, labels: Record<string, string>, phase = "Running") => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "apps", labels },
  spec: { nodeName: "node-1", containers: [{ name: "app", image: "app:1" }] },
  status: { phase },
});
const pdb = (name: string, matchLabels: Record<string, string>, status: Record<string, unknown>) => ({
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  metadata: { name, namespace: "apps" },
  spec: { minAvailable: 1, selector: { matchLabels } },
  status: { observedGeneration: 1, desiredHealthy: 1, currentHealthy: 1, expectedPods: 1, ...status },
});
const evict = (c: Clients, name: string) =>
  c.core.createNamespacedPodEviction({ namespace: "apps", name, body: { apiVersion: "policy/v1", kind: "Eviction", metadata: { name, namespace: "apps" } } });
const exists = (name: string) => api.get("v1", "Pod", "apps", name) !== undefined;
const budget = (name: string) =>
  api.get("policy/v1", "PodDisruptionBudget", "apps", name) as { status: { disruptionsAllowed: number; disruptedPods?: Record<string, string> } };

describe("pods/eviction", () => {
  test("no budget: the pod is deleted", async () => {
    await api.create(pod("free", { app: "free" }));
    // The answer is a Status (Success, 201), which client-node reads as an Eviction.
    await evict(admin, "free");
    assert.equal(exists("free"), false);
    assert.equal((await failure(evict(admin, "free"))).code, 404);
  });

  test("a budget that allows none: 429 with the real message and cause, the pod kept; once it allows one, evicted and counted", async () => {
    await api.create(pod("db-0", { app: "db" }));
    await api.create(pdb("db", { app: "db" }, { disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1 }));
    const f = await failure(evict(admin, "db-0"));
    assert.equal(f.code, 429);
    assert.equal(f.status.reason, "TooManyRequests");
    assert.equal(f.status.message, "Cannot evict pod as it would violate the pod's disruption budget.");
    assert.deepEqual(f.status.details?.causes, [{ reason: "DisruptionBudget", message: "The disruption budget db needs 1 healthy pods and has 1 currently" }]);
    assert.ok(exists("db-0"));
    // The disruption controller would do this once another replica is healthy.
    const b = api.get("policy/v1", "PodDisruptionBudget", "apps", "db") as Record<string, any>;
    api.update({ ...b, status: { ...b.status, disruptionsAllowed: 1, currentHealthy: 2 } });
    await evict(admin, "db-0");
    assert.equal(exists("db-0"), false);
    assert.equal(budget("db").status.disruptionsAllowed, 0);
    assert.ok(budget("db").status.disruptedPods?.["db-0"]);
  });

  test("a budget whose status lags its spec is 429; two budgets are 500; a pod not running ignores budgets", async () => {
    await api.create(pod("lag-0", { app: "lag" }));
    await api.create(pdb("lag", { app: "lag" }, { disruptionsAllowed: 5, observedGeneration: 0 }));
    const lag = await failure(evict(admin, "lag-0"));
    assert.equal(lag.code, 429);
    assert.deepEqual(lag.status.details?.causes?.[0]?.message, "The disruption budget lag is still being processed by the server.");
    await api.create(pod("two-0", { app: "two", tier: "x" }));
    await api.create(pdb("two-a", { app: "two" }, { disruptionsAllowed: 1 }));
    await api.create(pdb("two-b", { tier: "x" }, { disruptionsAllowed: 1 }));
    const two = await failure(evict(admin, "two-0"));
    assert.equal(two.code, 500);
    assert.equal(two.status.message, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.");
    await api.create(pod("pending-0", { app: "db" }, "Pending"));
    await evict(admin, "pending-0");
    assert.equal(exists("pending-0"), false, "a Pending pod is evicted whatever its budget says");
  });

  test("RBAC: create pods/eviction; delete on pods does not grant it", async () => {
    await api.create(pod("rbac-0", { app: "rbac" }));
    api.auth.addToken("evictor", { username: "evictor" });
    const evictor = clients(api.writeKubeconfig("evictor"));
    api.auth.allow("evictor", { verbs: ["delete"], apiGroups: [""], resources: ["pods"] });
    try {
      const f = await failure(evict(evictor, "rbac-0"));
      assert.equal(f.code, 403);
      assert.match(f.status.message!, /cannot create resource "pods\/eviction" in API group "" in the namespace "apps"/);
      api.auth.allow("evictor", { verbs: ["create"], apiGroups: [""], resources: ["pods/eviction"] });
      await evict(evictor, "rbac-0");
      assert.equal(exists("rbac-0"), false);
    } finally {
      api.auth.clearRules("evictor");
    }
  });
});
