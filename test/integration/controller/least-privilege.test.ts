// Least privilege proven (the way test/integration/sidecar/least-privilege.test.ts does it for the sidecar):
// the controller runs as its own ServiceAccount with exactly the rules deploy/ binds to it
// (rendered with kubectl kustomize), against an API server that enforces them, calling a sidecar
// that authorizes it (auth on, verb `call`) — and the whole flow works: leader election, the
// informers, the restart heal and its marker (a volume that only a Pod on the node shows included),
// Events (created, then bumped). Then, for every verb
// of every rule, the same flow runs with that one permission taken away, and it must fail.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { KUBE_API_AUDIENCE } from "../../kube/index.js";
import { loadManifests, noKubectl, readKustomization } from "../../support/deploy/load.js";
import { loadRbacRules, type Rule } from "../../support/deploy/rbac.js";
import { startControllerProc, type ControllerProc } from "../../support/controller.js";
import { tempDir } from "../../support/proc.js";
import { StopWaiting, waitFor } from "../../support/wait.js";
import { NAMESPACE, namespace } from "../../support/fixtures.js";
import { AUDIENCE, authArgs, makeTlsFiles, type TlsFiles } from "../../support/secure-sidecar.js";
import { HANDLED, handleOf, startStack, type Stack } from "../../support/stack.js";

const SA = "csi-addons-healer-controller";
/** The example install's namespace, where deploy/ runs the controller. */
const SA_NAMESPACE = readKustomization().namespace!;
const USER = `system:serviceaccount:${SA_NAMESPACE}:${SA}`;
const API_TOKEN = "ctl-api-token-5c2e9d7a1b3f4e6a8c0d";
const SIDECAR_TOKEN = "ctl-sidecar-token-8e1f3a5c7b9d2e4f6a0b";
const LEASE = { apiVersion: "coordination.k8s.io/v1", kind: "Lease", namespace: SA_NAMESPACE, name: "csi-addons-healer-controller" };

type Perm = { scope: "cluster" | "namespaced"; rule: Rule; verb: string; resource: string };

let stack: Stack;
let tls: TlsFiles;
let kubeconfig: string;
let tokenFile: string;
const rules = noKubectl ? { namespaced: [], cluster: [] } : loadRbacRules(loadManifests(), SA);

function grant(except?: Perm): void {
  stack.kube.auth.clearRules(USER);
  for (const scope of ["cluster", "namespaced"] as const) {
    for (const rule of rules[scope]) {
      for (const resource of rule.resources) {
        const verbs = rule.verbs.filter((v) => !(except && except.rule === rule && except.resource === resource && except.verb === v));
        if (verbs.length === 0) continue;
        stack.kube.auth.allow(USER, { ...rule, resources: [resource], verbs, ...(scope === "namespaced" ? { namespace: SA_NAMESPACE } : {}) });
      }
    }
  }
}

/** One run of the flow; resolves with the first step that did not happen within the deadline (undefined: all did). */
async function flow(timeoutMs: number): Promise<string | undefined> {
  // A fresh start: no lease, no events, a first-sight pass that finds pv-a broken.
  if (stack.kube.get(LEASE.apiVersion, LEASE.kind, LEASE.namespace, LEASE.name)) stack.kube.delete(LEASE.apiVersion, LEASE.kind, LEASE.namespace, LEASE.name);
  for (const ns of ["default", NAMESPACE]) for (const e of stack.kube.list("v1", "Event", ns) as any[]) stack.kube.delete("v1", "Event", ns, e.metadata.name);
  const node = stack.csiAddonsNode()!;
  delete node.metadata.annotations[HANDLED];
  stack.kube.update(node);
  const broken = () =>
    stack.stub.updateState((s) => {
      s.volumes![handleOf("pv-a")] = { state: "ABNORMAL", heal: "SUCCEED" };
      s.volumes![handleOf("pv-c")] = { state: "ABNORMAL", heal: "SUCCEED" };
    });
  broken();

  let c: ControllerProc | undefined;
  const step = async (what: string, probe: () => unknown) => {
    await waitFor(
      what,
      async () => {
        const forbidden = c?.logLines().find((l) => /HTTP 403|PERMISSION_DENIED/.test(JSON.stringify(l)));
        // A refusal (the API server's 403, the sidecar's PERMISSION_DENIED) ends the wait at once:
        // with one permission taken away, nothing else refuses.
        if (forbidden) throw new StopWaiting(`refused: ${JSON.stringify(forbidden)}`);
        return probe();
      },
      { timeoutMs },
    );
  };
  try {
    c = await startControllerProc({
      kubeconfig,
      waitStarted: false,
      args: [
        "--leader-elect=true",
        `--leader-election-namespace=${SA_NAMESPACE}`,
        "--leader-election-lease-duration=3s",
        "--leader-election-renew-deadline=2s",
        "--leader-election-retry-period=300ms",
        "--sidecar-tls=true",
        `--sidecar-ca-file=${tls.certFile}`,
        "--sidecar-tls-server-name=localhost",
        `--service-account=${SA_NAMESPACE}/${SA}`,
        "--check-interval=300ms",
      ],
    });
    const lease = () => stack.kube.get(LEASE.apiVersion, LEASE.kind, LEASE.namespace, LEASE.name) as any;
    await step("caches synced", () => c!.logLines().some((l) => l.message === "controller started"));
    await step("leader (Lease created)", () => c!.logLines().some((l) => l.message === "became leader"));
    await step("lease renewed", () => lease() && lease().spec.renewTime !== lease().spec.acquireTime);
    await step("pv-a healed through the sidecar", () => c!.heals({ pv: "pv-a", result: "HEALED" }).length > 0);
    await step("pv-c (a driver without attach: only a Pod on the node shows it) healed", () => c!.heals({ pv: "pv-c", result: "HEALED" }).length > 0);
    await step("handled marker recorded", () => stack.annotation(HANDLED));
    await step("VolumeHealed event on pv-a's claim", () =>
      (stack.kube.list("v1", "Event", NAMESPACE) as any[]).some((e) => e.reason === "VolumeHealed" && e.involvedObject.name === "data-a"),
    );
    broken();
    await step("a repeated event bumped", () => (stack.kube.list("v1", "Event", NAMESPACE) as any[]).some((e) => e.reason === "VolumeHealed" && e.count >= 2));
    await step(
      "still leading, nothing refused",
      () => c!.logLines().some((l) => l.message === "became leader") && !c!.logLines().some((l) => l.message === "stopped leading"),
    );
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await c?.stop();
  }
}

describe("the controller's RBAC from deploy/ is exactly what it needs", { skip: noKubectl }, () => {
  before(async () => {
    const dir = tempDir("ctl-lp-");
    tls = await makeTlsFiles(dir);
    tokenFile = join(dir, "token");
    writeFileSync(tokenFile, SIDECAR_TOKEN);
    stack = await startStack({
      volumes: { "pv-a": { state: "ABNORMAL", heal: "SUCCEED" }, "pv-b": { state: "HEALTHY" }, "pv-c": { state: "ABNORMAL", heal: "SUCCEED" } },
      claims: { "pv-a": "data-a" },
      withoutAttach: ["pv-c"],
      // The sidecar's default audiences (@node,@api-server): the controller's per-node token.
      sidecarArgs: [...authArgs("@node,@api-server", tls), "--auth-verb=call", "--auth-cache-ttl=0"],
      tls,
      kube: { requireRbac: true },
      extra: [namespace(SA_NAMESPACE), { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: SA, namespace: SA_NAMESPACE } }],
    });
    stack.kube.auth.addToken(API_TOKEN, { username: USER, groups: ["system:serviceaccounts"], audiences: [KUBE_API_AUDIENCE] });
    stack.kube.auth.addToken(SIDECAR_TOKEN, { username: USER, groups: ["system:serviceaccounts"], audiences: [AUDIENCE] });
    kubeconfig = stack.kube.writeKubeconfig(API_TOKEN, SA);
    await stack.startSidecar();
  });
  after(() => stack?.stop());

  test("with exactly deploy/'s rules the whole flow works", async () => {
    assert.ok(
      rules.cluster.some((r) => r.verbs.includes("call")),
      "the caller binding is part of the controller's rules",
    );
    grant();
    assert.equal(await flow(45_000), undefined);
  });

  const perms: Perm[] = (["cluster", "namespaced"] as const).flatMap((scope) =>
    rules[scope].flatMap((rule) => rule.resources.flatMap((resource) => rule.verbs.map((verb) => ({ scope, rule, verb, resource })))),
  );
  for (const p of perms) {
    test(`without ${p.verb} ${p.resource}${p.rule.resourceNames ? ` (${p.rule.resourceNames.join(",")})` : ""}, a step of the flow fails`, async (t) => {
      grant(p);
      try {
        const failed = await flow(12_000);
        assert.ok(failed, "nothing broke: the permission is not needed");
        t.diagnostic(`broke: ${failed.slice(0, 300)}`);
      } finally {
        grant();
      }
    });
  }
});
