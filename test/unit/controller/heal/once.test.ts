// heal/once: the heal subcommand (one node's volumes healed once, a table and an exit code).
import { test } from "node:test";
import assert from "node:assert/strict";
import { healOnce } from "../../../../controller/heal/once.js";
import type { PvInfo, SidecarInfo } from "../../../../controller/plan/types.js";
import { type ClusterView } from "../../../../controller/kube/api.js";
import { SIDECAR, PVS, fake, NEVER, HEALED } from "../../../support/heal-fakes.js";

// ---- the heal subcommand -----------------------------------------------------------------------

function terminal() {
  const progress: string[] = [];
  let out = "";
  return {
    progress,
    out: () => out,
    term: {
      progress: (l: string) => void progress.push(l),
      print: (t: string) => void (out += t),
    },
  };
}

const viewOf = (sidecars: SidecarInfo[], pvs: PvInfo[] = PVS) =>
  ({
    sidecars: () => sidecars,
    volumesOf: () => pvs,
  }) as unknown as ClusterView;

const resultRows = (out: string) =>
  out
    .split("\n")
    .filter((l) => l.startsWith("pv-"))
    .map((l) => l.split(/\s+/));

test("heal subcommand: a CSIAddonsNode being deleted is left alone; with no other on the node, exit 1 with the reason", async () => {
  const f = fake(() => HEALED);
  const t = terminal();
  const code = await healOnce(viewOf([{ ...SIDECAR, deleting: true }]), f.deps, { node: "n1", pv: undefined, mode: "always" }, t.term, 5_000);
  assert.equal(code, 1);
  assert.equal(t.out(), "no CSIAddonsNode for node n1\n");
  assert.deepEqual(f.calls, []);
});

test("heal subcommand: a node without volumes is nothing to do (exit 0); a --pv not on it is an error (exit 1)", async () => {
  const f = fake(() => HEALED);
  const t = terminal();
  assert.equal(await healOnce(viewOf([SIDECAR], []), f.deps, { node: "n1", pv: undefined, mode: "if-abnormal" }, t.term, 5_000), 0);
  assert.equal(t.out(), "no volumes on node n1\n");
  const u = terminal();
  assert.equal(await healOnce(viewOf([SIDECAR], []), f.deps, { node: "n1", pv: "pv-9", mode: "if-abnormal" }, u.term, 5_000), 1);
  assert.equal(u.out(), "PersistentVolume pv-9 is not on node n1\n");
  assert.deepEqual(f.calls, []);
});

test("heal subcommand: a driver without HEAL_VOLUME: every volume SKIPPED, the reason under the table, exit 1, nothing called", async () => {
  const f = fake(() => HEALED, {
    caps: { healVolume: false, getVolumeHealth: true },
  });
  const t = terminal();
  const code = await healOnce(viewOf([SIDECAR]), f.deps, { node: "n1", pv: undefined, mode: "always" }, t.term, 5_000);
  assert.equal(code, 1);
  assert.deepEqual(resultRows(t.out()), [
    ["pv-1", "drv", "h-pv-1", "SKIPPED"],
    ["pv-2", "drv", "h-pv-2", "SKIPPED"],
  ]);
  assert.match(t.out(), /^SKIPPED 2 \(mode ALWAYS, node n1\)\ncsi\/n1: skipped: driver drv does not offer VolumeHealer HEAL_VOLUME\n$/m);
  assert.deepEqual(f.calls, []);
});

test("heal subcommand: volumes not answered by the deadline are cancelled and listed as NO_ANSWER, exit 1", async () => {
  const f = fake(() => HEALED, {
    hold: (pv) => (pv === "pv-2" ? NEVER() : Promise.resolve()),
  });
  const t = terminal();
  const code = await healOnce(viewOf([SIDECAR]), f.deps, { node: "n1", pv: undefined, mode: "always" }, t.term, 200);
  assert.equal(code, 1);
  assert.deepEqual(resultRows(t.out()), [
    ["pv-1", "drv", "h-pv-1", "HEALED"],
    ["pv-2", "drv", "h-pv-2", "NO_ANSWER"],
  ]);
  assert.deepEqual(t.progress, ["[1/2] pv-1: HEALED"]);
  assert.equal(f.signals[f.calls.indexOf("pv-2")]?.aborted, true, "the call in flight is cancelled");
});
