// The CLI as a real process: `kube-api --seed ...` prints exactly one stdout line
// `kubeconfig: <path>`, serves the seeds (CRDs first, whatever the file order) over HTTPS to a
// client using that kubeconfig, and exits 0 on SIGTERM.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { type Proc, startTs, tempDir } from "../support/proc.js";
import { clients, cn, upstreamCrdFile } from "./testkit.js";

let proc: Proc | undefined;
after(async () => {
  await proc?.stop();
});

test("kube-api CLI: seeds, one kubeconfig line, HTTPS, exit 0 on SIGTERM", async () => {
  const seed = join(tempDir(), "seed.yaml");
  // The custom resource comes before its CRD's file on the command line: CRDs are loaded first.
  writeFileSync(
    seed,
    [
      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: csi\n",
      "apiVersion: csiaddons.openshift.io/v1alpha1\nkind: CSIAddonsNode\nmetadata:\n  name: seeded\n  namespace: csi\nspec:\n  driver:\n    name: d.example.com\n    endpoint: pod://p.csi:9070\n    nodeID: n1\n",
    ].join("---\n"),
  );
  proc = startTs("test/kube/cli.ts", ["--port", "0", "--seed", seed, "--seed", upstreamCrdFile]);
  await proc.waitForOutput(/kubeconfig: \S+\n/);
  const lines = proc
    .stdout()
    .split("\n")
    .filter((l) => l !== "");
  assert.equal(lines.length, 1);
  const path = lines[0]!.replace(/^kubeconfig: /, "");

  const c = clients(path);
  assert.match(c.kc.getCurrentCluster()!.server, /^https:\/\/127\.0\.0\.1:\d+$/);
  const obj: any = await c.custom.getNamespacedCustomObject(cn("seeded", "csi"));
  assert.equal(obj.spec.driver.nodeID, "n1");

  assert.equal(await proc.stop(), 0);
  proc = undefined;
});

test("kube-api CLI: a bad flag exits 2 with a usage line", async () => {
  const p = startTs("test/kube/cli.ts", ["--bogus"]);
  assert.equal(await p.exited, 2);
  assert.match(p.stderr(), /unknown argument --bogus/);
});
