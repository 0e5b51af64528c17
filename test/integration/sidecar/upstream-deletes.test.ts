// A forgotten permission must not become a hot loop. The upstream csi-addons controller deletes a
// CSIAddonsNode whose sidecar it cannot call; played here as its harshest form (a deletion after
// every refused connect, no pause of its own), against a sidecar with deploy/'s auth flags and no
// upstream-controller-access grant. The sidecar's recreations slow down, one warning says why
// (quoting the refusals), a metric counts them, and once access is granted the object stays.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { startKubeApi, type KubeApi } from "../../kube/index.js";
import { loadComponents } from "../../support/deploy/load.js";
import { grantsOf, installGrants } from "../../support/deploy/grants.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import type { SidecarProc } from "../../support/sidecar.js";
import { codeName } from "../../support/grpc.js";
import { UPSTREAM_USER, addUpstreamToken, startShippedSidecar, upstreamConnect } from "../../support/upstream-controller.js";
import { waitFor } from "../../support/wait.js";
import { CSI_ADDONS_NODE_NAME, NAMESPACE, baseObjects, upstreamCrdFile } from "../../support/fixtures.js";

const CAN = "csiaddons.openshift.io/v1alpha1";
const TOKENS = { upstream: "upstream-controller-token-9e8d7c6b", sidecar: "sidecar-sa-token-5f4e3d2c" };
/** How long the refused controller keeps deleting; the hot loop this guards against was seen at 90 deletions in this time. */
const WINDOW_MS = 20_000;

type Obj = { metadata: { uid: string } };

describe("the upstream controller refused, deleting the CSIAddonsNode after each refusal", () => {
  let kube: KubeApi;
  let stub: DriverStub;
  let sidecar: SidecarProc;

  const object = () => kube.get(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME) as Obj | undefined;
  /** One connect as the upstream controller makes it to the object it found (within `timeoutMs`), deleted when refused. */
  async function connectOnce(timeoutMs = 60_000): Promise<{ uid: string; code: string } | undefined> {
    const found = await waitFor("the CSIAddonsNode to exist", object, { timeoutMs, intervalMs: 10 }).catch(() => undefined);
    if (!found) return undefined;
    const r = await upstreamConnect(sidecar.address, TOKENS.upstream, 5_000);
    const code = r.ok ? "OK" : codeName((r as { code: grpc.status }).code);
    if (code === "PERMISSION_DENIED" && object()?.metadata.uid === found.metadata.uid) {
      kube.delete(CAN, "CSIAddonsNode", NAMESPACE, CSI_ADDONS_NODE_NAME);
    }
    return { uid: found.metadata.uid, code };
  }

  before(async () => {
    kube = await startKubeApi({ tls: true, requireRbac: true, crdFiles: [upstreamCrdFile], seed: baseObjects() });
    addUpstreamToken(kube, TOKENS.upstream);
    stub = await startDriverStub({});
    sidecar = await startShippedSidecar(kube, TOKENS.sidecar, stub.addonsSocket);
    await waitFor("the sidecar ready", async () => (await sidecar.readyz()) === 200, { timeoutMs: 30_000 });
  });

  after(async () => {
    const out = sidecar ? sidecar.proc.stdout() + sidecar.proc.stderr() : "";
    await sidecar?.stop();
    await stub?.stop();
    await kube?.stop();
    for (const t of Object.values(TOKENS)) assert.ok(!out.includes(t), "no token in the sidecar's output");
  });

  test("recreations slow down, one warning per pause names the refusals, a metric counts them; granted, the object stays", async (t) => {
    const uids = new Set<string>();
    let refused = 0;
    const until = Date.now() + WINDOW_MS;
    for (let left = WINDOW_MS; left > 0; left = until - Date.now()) {
      const seen = await connectOnce(left);
      if (!seen) break;
      const { uid, code } = seen;
      uids.add(uid);
      if (code === "PERMISSION_DENIED") refused++;
      else assert.equal(code, "UNAVAILABLE", "refused, or not ready while its object is missing");
    }
    const created = uids.size;
    // Deletions answered at once would create it for every refusal (dozens in the window); with
    // waits of 0, 1, 2, 4, 8 s the creations are the first, the first recreation and four paused.
    assert.ok(refused >= 5, `refused ${refused} times`);
    assert.ok(created >= 4 && created <= 7, `${created} objects created in ${WINDOW_MS / 1000} s for ${refused} refusals`);

    const warnings = sidecar.logLines().filter((l) => l["message"] === "CSIAddonsNode keeps being deleted; waiting before creating it again");
    assert.ok(warnings.length >= 3 && warnings.length <= created, `${warnings.length} warnings for ${created} objects`);
    const waits = warnings.map((w) => w["waitSeconds"] as number);
    assert.deepEqual(
      waits,
      [...waits].sort((a, b) => a - b),
      `waits grow: ${waits.join(", ")}`,
    );
    assert.ok(waits[waits.length - 1]! > waits[0]!, `waits grow: ${waits.join(", ")}`);
    t.diagnostic(`${refused} refusals, ${created} objects created in ${WINDOW_MS / 1000} s; waits before recreating: ${waits.join(", ")} s`);
    for (const w of warnings) {
      assert.match(String(w["refusedSinceCreated"]), /^permission_denied ×1 \(last: .*csiaddonsnodes.*\)$/, JSON.stringify(w));
      assert.match(String(w["likelyCause"]), /upstream-controller-access/);
    }

    // The metric counts every creation after a deletion, paused or not.
    const metrics = await waitFor("the recreations counted", async () => {
      const text = await sidecar.metrics();
      const n = Number(/^csi_addons_sidecar_csiaddonsnode_recreations_total (\d+)/m.exec(text)?.[1]);
      return n >= created - 1 ? n : undefined;
    });
    assert.ok(metrics <= created, `${metrics} recreations counted for ${created} objects`);

    installGrants(
      kube,
      grantsOf(loadComponents("controller", "upstream-controller-access")).filter((g) => g.user === UPSTREAM_USER),
    );
    // The pause in progress ends, the object is created once more, and no refusal deletes it again.
    const granted = await waitFor(
      "a connect that is allowed",
      async () => {
        const r = await connectOnce();
        return r?.code === "OK" ? r : undefined;
      },
      { timeoutMs: 90_000 },
    );
    for (let i = 0; i < 3; i++) assert.deepEqual(await connectOnce(), granted, "the same object answers, allowed");
    await waitFor("the sidecar ready", async () => (await sidecar.readyz()) === 200);
    assert.equal(object()?.metadata.uid, granted.uid);
  });
});
