// Least privilege proven: the sidecar runs as its own ServiceAccount with exactly the RBAC
// that deploy/ grants (read from the YAML), against an API server that enforces it, with TLS and
// caller authentication on — and the whole flow works. Then, for every verb of every rule, the
// same flow runs with that one permission taken away, and some step must fail. A permission
// whose loss breaks nothing is one the sidecar does not need: that case fails and names it.
//
// The sidecar's pod belongs to a Deployment (through a ReplicaSet) because that is the one owner
// whose resolution reads an object (the ReplicaSet); a DaemonSet owner is named on the Pod itself.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { KUBE_API_AUDIENCE, startKubeApi, type KubeApi } from "../../kube/index.js";
import { loadRbacRules, sidecarServiceAccount, type RbacRules, type Rule } from "../../support/deploy/rbac.js";
import { render } from "../../support/deploy/load.js";
import { startDriverStub, type DriverStub, type StubState } from "../../support/driver-stub.js";
import { startSidecarProc, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { call, codeName } from "../../support/grpc.js";
import { StopWaiting, waitFor } from "../../support/wait.js";
import { DRIVER, NAMESPACE, NODE, csiDriver, namespace, node, pv, secret, upstreamCrdFile, userPod, volumeAttachment } from "../../support/fixtures.js";
import { VolumeHealerClient, HealVolumeRequest_Mode as Mode } from "../../../proto/gen/sidecar/v1/healer.js";
import { NodeHealVolumeResponse_Result as Result, VolumeHealth_State as State } from "../../../proto/gen/healer/v1/healer.js";
import { secretDigest } from "../../../driver-stub/call-log.js";
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
import { reasonFor } from "../../support/heal-request.js";

const SA_USER = `system:serviceaccount:${NAMESPACE}:${sidecarServiceAccount}`;
const SA_TOKEN = "sa-token-3c1f9e0b7d2a4e58b6a1c0d9e8f7a6b5";
const HEALER_TOKEN = "healer-token-9a8b7c6d5e4f30211f2e3d4c5b6a7988";
const SECRET_VALUE = "stage-secret-value-0f1e2d3c";
const CAN = "csiaddons.openshift.io/v1alpha1";

const DEPLOYMENT = "csi-controller";
const REPLICASET = "csi-controller-6d9f7c8b5";
const POD = "csi-controller-6d9f7c8b5-x2x9q";
const DEPLOYMENT_UID = "7a0c7c1e-3333-4a4a-9d9d-000000000003";
const REPLICASET_UID = "7a0c7c1e-4444-4a4a-9d9d-000000000004";
const NODE_OBJECT = `${NODE}-${NAMESPACE}-deployment-${DEPLOYMENT}`;
const DRIVER_RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";
/** Events the API server keeps for watches (the real one's default watch cache size). */
const WATCH_WINDOW = 100;

type Obj = Record<string, any>;

function deploymentObjects(): Obj[] {
  const labels = { app: DEPLOYMENT };
  const template = { metadata: { labels }, spec: { containers: [{ name: "csi-addons-healer", image: "healer:dev" }] } };
  const owner = (kind: string, name: string, uid: string) => [{ apiVersion: "apps/v1", kind, name, uid, controller: true, blockOwnerDeletion: true }];
  return [
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: DEPLOYMENT, namespace: NAMESPACE, uid: DEPLOYMENT_UID },
      spec: { selector: { matchLabels: labels }, template },
    },
    {
      apiVersion: "apps/v1",
      kind: "ReplicaSet",
      metadata: { name: REPLICASET, namespace: NAMESPACE, uid: REPLICASET_UID, labels, ownerReferences: owner("Deployment", DEPLOYMENT, DEPLOYMENT_UID) },
      spec: { selector: { matchLabels: labels }, template },
    },
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: POD, namespace: NAMESPACE, labels, ownerReferences: owner("ReplicaSet", REPLICASET, REPLICASET_UID) },
      spec: { nodeName: NODE, containers: template.spec.containers },
    },
  ];
}

/** What a previous sidecar of another driver left behind: the update is refused (422), so it is deleted and created anew. */
function staleNodeObject(): Obj {
  return {
    apiVersion: CAN,
    kind: "CSIAddonsNode",
    metadata: { name: NODE_OBJECT, namespace: NAMESPACE },
    spec: { driver: { name: "old.csi.example.com", endpoint: "pod://gone.csi:9070", nodeID: NODE } },
  };
}

const STUB_STATE: StubState = {
  // A controller plugin (the sidecar runs in a Deployment's pod), so the Lease is part of the flow.
  capabilities: { controllerService: true },
  volumes: {
    "vol-heal": { state: "ABNORMAL", reason: "TransportEndpointNotConnected", message: "fuse daemon died", heal: "SUCCEED" },
    "vol-na": { state: "HEALTHY" },
    "vol-po": { state: "HEALTHY" },
  },
};

// ---- the flow -------------------------------------------------------------------------------

const STEPS = [
  "SERVING with the CSIAddonsNode in place (a stale one replaced)",
  "GetVolumeHealth of an attached volume",
  "HealVolume IF_ABNORMAL with the stage secret",
  "GetVolumeHealth of a volume without attach (the Node's volumesInUse)",
  "the own Node kept by a watch (no API read per request)",
  "a deleted CSIAddonsNode recreated through the watch",
  "a driver restart recorded on the CSIAddonsNode",
  "PersistentVolumes kept by a watch (no API read per repeated health check)",
  "the controller plugin's Lease held and renewed",
  "GetVolumeHealth of a volume without attach that only a Pod on this node shows",
  "this node's Pods kept by a watch (no API list per request)",
  "HealVolume ALWAYS of a volume without attach, twice: its CSIDriver read (no VolumeAttachment read the second time)",
  "GetVolumeHealth of a PersistentVolume that does not exist: NOT_FOUND (its watch shows nothing, so it is read)",
] as const;
type Step = (typeof STEPS)[number];

class StepFailed extends Error {
  constructor(
    readonly step: Step,
    readonly code: string | undefined,
    why: string,
  ) {
    super(`step "${step}" failed${code ? ` with ${code}` : ""}: ${why}`);
  }
}

let kube: KubeApi;
let stub: DriverStub;
let tls: TlsFiles;
let saKubeconfig: string;

const LEASE = "stub-csi-example-com-csi-addons";
const getLease = () => kube.get("coordination.k8s.io/v1", "Lease", NAMESPACE, LEASE) as Obj | undefined;
const getNodeObject = () => kube.get(CAN, "CSIAddonsNode", NAMESPACE, NODE_OBJECT) as Obj | undefined;
const creds = () => tlsCredentials(tls);
const serving = (s: SidecarProc) => checkHealth(s.address, creds(), TLS_CLIENT_OPTIONS).then((st) => st === "SERVING");
const logCount = (s: SidecarProc, message: string) => s.logLines().filter((l) => l.message === message).length;

/** Runs the steps in order; throws StepFailed at the first one that does not work. */
async function flow(sidecar: SidecarProc): Promise<void> {
  const client = new VolumeHealerClient(sidecar.address, creds(), TLS_CLIENT_OPTIONS);
  const metadata = { authorization: `Bearer ${HEALER_TOKEN}` };
  const expectOk = async <T>(step: Step, p: Promise<{ ok: true; value: T } | { ok: false; code: grpc.status; details: string }>): Promise<T> => {
    const r = await p;
    if (!r.ok) throw new StepFailed(step, codeName(r.code), r.details);
    return r.value;
  };
  // A wait within a step ends at once when the API server has refused the sidecar the step's
  // resource (its Forbidden text in the sidecar's log): with one permission taken away, nothing
  // will grant it later. `why` says what failed when the wait runs out instead.
  const within = async <T>(step: Step, resource: string, what: string, probe: () => T | Promise<T>, timeoutMs: number, why: () => string) => {
    const refused = new RegExp(`cannot \\w+ resource "${resource}"`);
    await waitFor(
      what,
      () => {
        const line = sidecar.logLines().find((l) => Object.values(l).some((v) => typeof v === "string" && refused.test(v)));
        if (line) throw new StopWaiting(`${String(line.message)}: ${String(line.reason ?? line.error)}`);
        return probe();
      },
      { timeoutMs },
    ).catch((err: Error) => {
      throw err instanceof StepFailed ? err : new StepFailed(step, undefined, err instanceof StopWaiting ? err.message : why());
    });
  };
  try {
    let step: Step = STEPS[0];
    const staleUid = getNodeObject()?.metadata.uid;
    const outcome = await waitFor(
      "SERVING, or the API server refusing the CSIAddonsNode",
      async () => {
        if (await serving(sidecar)) return "SERVING";
        const refused = sidecar.logLines().find((l) => l.message === "cannot put CSIAddonsNode in place; retrying" && /\b403\b/.test(String(l.reason)));
        return refused ? `never SERVING: ${String(refused.reason)}` : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    ).catch((err: Error) => `never SERVING: ${err.message}`);
    if (outcome !== "SERVING") throw new StepFailed(step, undefined, outcome);
    const placed = getNodeObject();
    if (!placed || placed.metadata.uid === staleUid || placed.spec.driver.name !== DRIVER) {
      throw new StepFailed(step, undefined, `CSIAddonsNode not replaced: ${JSON.stringify(placed?.spec)}`);
    }

    step = STEPS[1];
    const h = await expectOk(step, call(client, client.getVolumeHealth, { pvName: "pv-heal" }, { metadata }));
    if (h.health?.state !== State.ABNORMAL) throw new StepFailed(step, undefined, `health ${JSON.stringify(h.health)}, expected ABNORMAL`);

    step = STEPS[2];
    const healed = await expectOk(
      step,
      call(client, client.healVolume, { pvName: "pv-heal", mode: Mode.IF_ABNORMAL, reason: reasonFor(Mode.IF_ABNORMAL) }, { metadata }),
    );
    if (healed.result !== Result.HEALED) throw new StepFailed(step, undefined, `result ${healed.result}, expected HEALED`);
    const [healCall] = stub.calls({ method: "NodeHealVolume", volumeId: "vol-heal" }).slice(-1);
    if (!healCall || JSON.stringify((healCall.request as Obj).secrets) !== JSON.stringify({ userKey: secretDigest(SECRET_VALUE) })) {
      throw new StepFailed(step, undefined, `the driver did not get the stage secret: ${JSON.stringify(healCall?.request)}`);
    }

    step = STEPS[12];
    const absent = await call(client, client.getVolumeHealth, { pvName: "pv-absent" }, { metadata });
    if (absent.ok || absent.code !== grpc.status.NOT_FOUND) {
      throw new StepFailed(step, absent.ok ? "OK" : codeName(absent.code), absent.ok ? "answered for a PV that does not exist" : absent.details);
    }

    step = STEPS[3];
    const na = await expectOk(step, call(client, client.getVolumeHealth, { pvName: "pv-noattach" }, { metadata }));
    if (na.health?.state !== State.HEALTHY) throw new StepFailed(step, undefined, `health ${JSON.stringify(na.health)}, expected HEALTHY`);

    step = STEPS[9];
    const po = await expectOk(step, call(client, client.getVolumeHealth, { pvName: "pv-podonly" }, { metadata }));
    if (po.health?.state !== State.HEALTHY) throw new StepFailed(step, undefined, `health ${JSON.stringify(po.health)}, expected HEALTHY`);

    step = STEPS[10];
    await within(
      step,
      "pods",
      "the sidecar's watch of this node's Pods",
      () => kube.counters.get("watch", "pods") >= 1,
      10_000,
      () => "the sidecar never watched this node's Pods",
    );
    // A watch refused at once would count too: the lists must stop once it stands.
    await within(
      step,
      "pods",
      "the Pods served from the watch",
      async () => {
        const lists = kube.counters.get("list", "pods");
        for (let i = 0; i < 3; i++) await expectOk(step, call(client, client.getVolumeHealth, { pvName: "pv-podonly" }, { metadata }));
        return kube.counters.get("list", "pods") === lists;
      },
      5_000,
      () => "this node's Pods are listed for every request: not served from a watch",
    );

    step = STEPS[11];
    // The first heal finds no VolumeAttachment and asks the CSIDriver; the second knows.
    for (const heal of ["first", "second"]) {
      const vaReads = kube.counters.get("get", "volumeattachments");
      const po2 = await expectOk(
        step,
        call(client, client.healVolume, { pvName: "pv-podonly", mode: Mode.ALWAYS, reason: reasonFor(Mode.ALWAYS) }, { metadata }),
      );
      // The driver's own answer after a restart (the data path made again): it was asked.
      if (po2.result !== Result.HEALED) throw new StepFailed(step, undefined, `result ${po2.result}, expected the driver's HEALED`);
      const vaExtra = kube.counters.get("get", "volumeattachments") - vaReads;
      if (heal === "second" && vaExtra !== 0)
        throw new StepFailed(
          step,
          undefined,
          `${vaExtra} GET(s) of a VolumeAttachment to heal again a volume whose driver has no attach step (its CSIDriver says so)`,
        );
    }

    step = STEPS[4];
    // Once the watch request has arrived, the cache is synced (the sidecar reads, then watches).
    await within(
      step,
      "nodes",
      "the sidecar's watch on its Node",
      () => kube.counters.get("watch", "nodes") >= 1,
      10_000,
      () => "the sidecar never watched its Node",
    );
    const reads = kube.counters.get("get", "nodes");
    for (let i = 0; i < 3; i++) await expectOk(step, call(client, client.getVolumeHealth, { pvName: "pv-noattach" }, { metadata }));
    const extra = kube.counters.get("get", "nodes") - reads;
    if (extra !== 0) throw new StepFailed(step, undefined, `${extra} GET(s) of Node ${NODE} for 3 requests: the Node is not served from a watch`);

    step = STEPS[7];
    await within(
      step,
      "persistentvolumes",
      "the sidecar's watch of PersistentVolumes",
      () => kube.counters.get("watch", "persistentvolumes") >= 1,
      10_000,
      () => "the sidecar never watched PersistentVolumes",
    );
    await expectOk(step, call(client, client.getVolumeHealth, { pvName: "pv-noattach" }, { metadata }));
    const pvReads = kube.counters.get("get", "persistentvolumes");
    for (let i = 0; i < 3; i++) await expectOk(step, call(client, client.getVolumeHealth, { pvName: "pv-noattach" }, { metadata }));
    const pvExtra = kube.counters.get("get", "persistentvolumes") - pvReads;
    if (pvExtra !== 0)
      throw new StepFailed(step, undefined, `${pvExtra} GET(s) of PersistentVolume pv-noattach for 3 checks: not served from the watched cache`);

    step = STEPS[5];
    const before = getNodeObject()!;
    const seen = logCount(sidecar, "CSIAddonsNode was deleted; recreating it");
    kube.delete(CAN, "CSIAddonsNode", NAMESPACE, NODE_OBJECT);
    await within(
      step,
      "csiaddonsnodes",
      "the CSIAddonsNode recreated",
      () => {
        const o = getNodeObject();
        return o !== undefined && o.metadata.uid !== before.metadata.uid;
      },
      10_000,
      () => "not recreated within 10 s",
    );
    await within(
      step,
      "csiaddonsnodes",
      "the watch to report the deletion",
      () => logCount(sidecar, "CSIAddonsNode was deleted; recreating it") > seen,
      2_000,
      () => "recreated by a retry after its watch failed, not because the watch saw the deletion",
    );

    step = STEPS[6];
    await stub.kill();
    stub = await startDriverStub({ ...stub.options, state: undefined });
    await within(
      step,
      "csiaddonsnodes",
      "driverRestartedAt on the CSIAddonsNode",
      () => getNodeObject()?.metadata.annotations?.[DRIVER_RESTARTED_AT],
      15_000,
      () => `no ${DRIVER_RESTARTED_AT} annotation within 15 s`,
    );
    await within(
      step,
      "csiaddonsnodes",
      "SERVING after the driver restart",
      () => serving(sidecar),
      15_000,
      () => "not SERVING again after the driver restart",
    );

    step = STEPS[8];
    // Created (or taken over) with this pod as holder, then renewed by an update.
    await within(
      step,
      "leases",
      "the Lease held by this pod and renewed",
      () => {
        const l = getLease();
        return l?.spec.holderIdentity === POD && l.spec.renewTime !== l.spec.acquireTime;
      },
      10_000,
      () => `Lease ${LEASE}: ${JSON.stringify(getLease()?.spec)}`,
    );
  } finally {
    client.close();
  }
}

// ---- one run per permission set ---------------------------------------------------------------

/** Installs `rules` as the ServiceAccount's only permissions: the Role's in the sidecar's namespace, the ClusterRole's everywhere. */
function grant(rules: RbacRules): void {
  kube.auth.clearRules(SA_USER);
  for (const r of rules.namespaced) kube.auth.allow(SA_USER, { ...r, namespace: NAMESPACE });
  for (const r of rules.cluster) kube.auth.allow(SA_USER, { ...r });
}

async function resetWorld(rules: RbacRules): Promise<void> {
  for (const o of kube.list(CAN, "CSIAddonsNode", NAMESPACE) as Obj[]) {
    if (o.metadata.finalizers?.length) kube.update({ ...o, metadata: { ...o.metadata, finalizers: [] } });
    if (kube.get(CAN, "CSIAddonsNode", NAMESPACE, o.metadata.name)) kube.delete(CAN, "CSIAddonsNode", NAMESPACE, o.metadata.name);
  }
  if (getLease()) kube.delete("coordination.k8s.io/v1", "Lease", NAMESPACE, LEASE);
  await kube.create(staleNodeObject());
  stub.setState(STUB_STATE);
  grant(rules);
  kube.counters.reset();
}

/** The flow's first failure under `rules`, or undefined when every step works. */
async function runWith(rules: RbacRules): Promise<StepFailed | undefined> {
  await resetWorld(rules);
  const sidecar = await startSidecarProc({
    driverSocket: stub.addonsSocket,
    kubeconfig: saKubeconfig,
    pod: POD,
    args: [...authArgs(AUDIENCE, tls), "--leader-election-retry-period=200ms", "--leader-election-renew-deadline=2s", "--leader-election-lease-duration=3s"],
  });
  try {
    await flow(sidecar);
    return undefined;
  } catch (err) {
    if (err instanceof StepFailed) return err;
    throw err;
  } finally {
    const out = sidecar.proc.stdout() + sidecar.proc.stderr();
    await sidecar.stop();
    sidecar.logLines(); // every line is JSON
    for (const t of [SA_TOKEN, HEALER_TOKEN, SECRET_VALUE]) assert.ok(!out.includes(t), "no token or secret value in the sidecar's output");
  }
}

/** deploy/'s rules with one verb of one rule taken away (the rule goes when it was its last verb). */
function without(rules: RbacRules, scope: keyof RbacRules, index: number, verb: string): RbacRules {
  const cut = (list: Rule[]) => list.flatMap((r, i) => (i !== index ? [r] : r.verbs.length > 1 ? [{ ...r, verbs: r.verbs.filter((v) => v !== verb) }] : []));
  return { namespaced: scope === "namespaced" ? cut(rules.namespaced) : rules.namespaced, cluster: scope === "cluster" ? cut(rules.cluster) : rules.cluster };
}

// What we expect to break without each permission ("verb resource"). A permission missing here is
// still tested: some step must fail without it.
const EXPECTED: Record<string, { step: Step; code?: keyof typeof grpc.status }> = {
  "get csiaddonsnodes": { step: STEPS[0] },
  "watch csiaddonsnodes": { step: STEPS[5] },
  "create csiaddonsnodes": { step: STEPS[0] },
  "update csiaddonsnodes": { step: STEPS[0] },
  "delete csiaddonsnodes": { step: STEPS[0] },
  "get pods": { step: STEPS[0] },
  "get replicasets": { step: STEPS[0] },
  "get persistentvolumes": { step: STEPS[12], code: "FAILED_PRECONDITION" },
  "watch persistentvolumes": { step: STEPS[7] },
  "get volumeattachments": { step: STEPS[1], code: "FAILED_PRECONDITION" },
  "get nodes": { step: STEPS[1], code: "FAILED_PRECONDITION" }, // the watched Node is asked first
  "list pods": { step: STEPS[9], code: "FAILED_PRECONDITION" },
  "get csidrivers": { step: STEPS[11] },
  "watch pods": { step: STEPS[10] },
  "watch nodes": { step: STEPS[4] },
  "get secrets": { step: STEPS[2], code: "FAILED_PRECONDITION" },
  "create tokenreviews": { step: STEPS[1], code: "UNAVAILABLE" },
  "create subjectaccessreviews": { step: STEPS[1], code: "UNAVAILABLE" },
  "get leases": { step: STEPS[8] },
  "create leases": { step: STEPS[8] },
  "update leases": { step: STEPS[8] },
};

describe("least privilege: the sidecar with exactly deploy/'s RBAC", () => {
  // A controller plugin: base/ and the Lease component it adds (least authority: node plugins get no Lease rule).
  const deployed = loadRbacRules(
    render("examples/controller-plugin").map((doc) => ({ file: "examples/controller-plugin", doc })),
    "csi-stub-controller-example",
  );
  // The baseline runs once per file run, whichever test needs it first: a case run alone by name
  // runs it too, and fails (never skips) when the flow does not work even with every permission.
  let baseline: Promise<StepFailed | undefined> | undefined;
  const runBaseline = () => (baseline ??= runWith(deployed));

  before(async () => {
    kube = await startKubeApi({
      tls: true,
      requireRbac: true,
      historySize: WATCH_WINDOW,
      crdFiles: [upstreamCrdFile],
      seed: [
        namespace(),
        node([`kubernetes.io/csi/${DRIVER}^vol-na`]),
        ...deploymentObjects(),
        secret(NAMESPACE, "stage-secret", { userKey: SECRET_VALUE }),
        pv("pv-heal", { handle: "vol-heal", secret: { namespace: NAMESPACE, name: "stage-secret" } }),
        volumeAttachment("pv-heal", "vol-heal"),
        pv("pv-noattach", { handle: "vol-na" }),
        pv("pv-podonly", { handle: "vol-po", claim: "claim-po" }),
        userPod("app-po", ["claim-po"]),
        // pv-podonly's driver as a CephFS-like one would declare it (pv-heal has its VolumeAttachment all the same).
        csiDriver(false),
      ],
    });
    // A quiet Node's resourceVersion soon leaves the watch window on a real cluster; so it does here.
    for (let i = 0; i < 2 * WATCH_WINDOW; i++) await kube.create(secret("default", `churn-${i}`, { n: String(i) }));
    kube.auth.addToken(SA_TOKEN, {
      username: SA_USER,
      groups: ["system:serviceaccounts", `system:serviceaccounts:${NAMESPACE}`],
      audiences: [KUBE_API_AUDIENCE],
    });
    kube.auth.addToken(HEALER_TOKEN, { username: HEALER_USER, groups: ["system:serviceaccounts"], audiences: [AUDIENCE] });
    allowHealer(kube);
    saKubeconfig = kube.writeKubeconfig(SA_TOKEN, SA_USER);
    const dir = tempDir();
    tls = await makeTlsFiles(dir);
    stub = await startDriverStub({ dir, state: STUB_STATE });
  });

  after(async () => {
    assert.deepEqual(stub?.csiCalls() ?? [], [], "the sidecar never dialled the CSI socket");
    await stub?.stop();
    await kube?.stop();
  });

  test("with every permission of deploy/ the whole flow works, as the ServiceAccount, over TLS with caller auth", async () => {
    assert.ok(deployed.namespaced.length > 0 && deployed.cluster.length > 0, "deploy/ grants a Role and a ClusterRole");
    const failure = await runBaseline();
    assert.equal(failure, undefined, failure?.message);
    // The API server really enforced the rules: the sidecar used its own identity, not the admin's.
    assert.ok(kube.counters.get("create", "tokenreviews") >= 1 && kube.counters.get("create", "subjectaccessreviews") >= 1);
  });

  const cases = (["namespaced", "cluster"] as const).flatMap((scope) =>
    deployed[scope].flatMap((rule, index) => rule.verbs.map((verb) => ({ scope, index, verb, rule }))),
  );
  for (const c of cases) {
    const key = `${c.verb} ${c.rule.resources.join(",")}`;
    const where = c.scope === "namespaced" ? `Role, namespace ${NAMESPACE}` : "ClusterRole";
    test(`without "${key}${c.rule.apiGroups[0] ? "." + c.rule.apiGroups.join(",") : ""}" (${where}) some step fails`, async (t) => {
      const base = await runBaseline();
      assert.equal(base, undefined, `the flow does not work even with every permission: ${base?.message}`);
      const failure = await runWith(without(deployed, c.scope, c.index, c.verb));
      assert.ok(failure, `every step works without "${key}" (${where}): deploy/ grants a permission the sidecar does not need`);
      t.diagnostic(failure.message);
      const expected = EXPECTED[key];
      if (expected) {
        assert.equal(failure.step, expected.step, failure.message);
        assert.equal(failure.code, expected.code, failure.message);
      }
    });
  }
});
