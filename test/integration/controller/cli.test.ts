// The command line: flags in the sidecar's style (--help, --version, exit 2 naming a bad flag)
// and the one-shot `heal` subcommand with its progress lines and summary table.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startJs, tempDir, startProgram } from "../../support/proc.js";
import { COMPILED_CONTROLLER, ensureCompiled } from "../../bench/build.js";
import { CONTROLLER_NODE_FLAGS } from "../../bench/image.js";
import { HANDLED, handleOf, startStack, type Stack } from "../../support/stack.js";

async function runCli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const p = startProgram("controller", args, { env });
  const code = await p.exited;
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}

describe("flags", () => {
  test("--help lists the flags; --version; a bad flag exits 2 with one line naming it (real process)", async () => {
    const help = await runCli(["--help"]);
    assert.equal(help.code, 0);
    for (const flag of ["--check-interval", "--sidecar-ca-file", "--token-file", "--leader-elect", "--per-node-concurrency", "heal --node"])
      assert.ok(help.stdout.includes(flag), flag);
    const v = await runCli(["--version"]);
    assert.equal(v.code, 0);
    assert.match(v.stdout, /^csi-addons-healer-controller \d+\.\d+\.\d+\n$/);
    const bad = await runCli(["--sidecar-tls=false"], { CHECK_INTERVAL: "soon" });
    assert.equal(bad.code, 2);
    assert.equal(bad.stderr, 'csi-addons-healer-controller: invalid configuration: --check-interval must be a duration like 30s or 3m, got "soon"\n');
  });

  test("a fatal start-up error exits 1 with its reason in the log and in --termination-log (or TERMINATION_LOG)", async () => {
    const dir = tempDir();
    const args = ["--sidecar-tls=false", `--kubeconfig=${join(dir, "absent-kubeconfig")}`];
    const byFlag = await runCli([...args, `--termination-log=${join(dir, "by-flag")}`]);
    assert.equal(byFlag.code, 1);
    assert.match(byFlag.stdout, /absent-kubeconfig/);
    assert.match(readFileSync(join(dir, "by-flag"), "utf8"), /^fatal: .*absent-kubeconfig/);
    const byEnv = await runCli(args, { TERMINATION_LOG: join(dir, "by-env") });
    assert.equal(byEnv.code, 1);
    assert.match(readFileSync(join(dir, "by-env"), "utf8"), /absent-kubeconfig/);
  });
});

describe("heal subcommand", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      volumes: {
        "pv-a": { state: "ABNORMAL", heal: "SUCCEED" },
        "pv-b": { state: "HEALTHY" },
        "pv-c": { state: "ABNORMAL", heal: "NOT_HEALABLE" },
        "pv-d": { state: "ABNORMAL", heal: "SUCCEED" },
      },
      // Only a Pod on the node shows pv-d (a driver without attach): the table counts it up front.
      withoutAttach: ["pv-d"],
    });
    await stack.startSidecar();
  });
  after(() => stack?.stop());

  const heal = (...args: string[]) => runCli(["heal", `--kubeconfig=${stack.kube.kubeconfigPath}`, "--sidecar-tls=false", ...args]);

  test("one IF_ABNORMAL pass over the node: progress, a summary table, exit 1 when a volume is not healed", async () => {
    const r = await heal("--node=node-1");
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /\[4\/4\] pv-\w: /);
    const rows = r.stdout.split("\n").filter((l) => l.startsWith("pv-"));
    assert.deepEqual(
      rows.map((l) => l.split(/\s+/)),
      [
        ["pv-a", "stub.csi.example.com", handleOf("pv-a"), "HEALED"],
        ["pv-b", "stub.csi.example.com", handleOf("pv-b"), "NOT_NEEDED"],
        ["pv-c", "stub.csi.example.com", handleOf("pv-c"), "NOT_HEALABLE"],
        ["pv-d", "stub.csi.example.com", handleOf("pv-d"), "HEALED"],
      ],
    );
    assert.match(r.stdout, /^PV\s+DRIVER\s+VOLUME HANDLE\s+RESULT$/m);
    // A table: every column starts where its heading does.
    const heading = r.stdout.split("\n").find((l) => l.startsWith("PV "))!;
    const starts = ["DRIVER", "VOLUME HANDLE", "RESULT"].map((h) => heading.indexOf(h));
    for (const row of rows) {
      const [pvName, driver, handle, result] = row.split(/\s+/) as [string, string, string, string];
      assert.deepEqual(
        [row.indexOf(driver, pvName.length), row.indexOf(handle, starts[0]! + driver.length), row.indexOf(result, starts[1]! + handle.length)],
        starts,
        row,
      );
    }
    assert.match(r.stdout, /HEALED 2, NOT_NEEDED 1, NOT_HEALABLE 1 \(mode IF_ABNORMAL, node node-1\)/);
    assert.equal(stack.heals("pv-b"), 0);
    assert.equal(stack.annotation(HANDLED), undefined, "a manual pass writes no marker");
  });

  test("--pv and --mode always: exactly that volume, re-staged, exit 0", async () => {
    const before = stack.heals("pv-b");
    const beforeA = stack.heals("pv-a");
    const r = await heal("--node=node-1", "--pv=pv-b", "--mode=always");
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(
      r.stdout
        .split("\n")
        .filter((l) => l.startsWith("pv-"))
        .map((l) => l.split(/\s+/)[0]),
      ["pv-b"],
    );
    assert.equal(stack.heals("pv-b"), before + 1);
    assert.equal(stack.heals("pv-a"), beforeA, "untouched");
  });

  test("the bundled controller as the image runs it (deploy/'s NODE_OPTIONS): the same pass, and on stderr only its log and progress", async () => {
    ensureCompiled(() => undefined, [COMPILED_CONTROLLER]);
    const before = stack.heals("pv-b");
    const args = ["heal", `--kubeconfig=${stack.kube.kubeconfigPath}`, "--sidecar-tls=false", "--node=node-1", "--pv=pv-b", "--mode=always"];
    const p = startJs(COMPILED_CONTROLLER, args, { env: { NODE_OPTIONS: CONTROLLER_NODE_FLAGS.join(" ") } });
    const code = await p.exited;
    assert.equal(code, 0, p.stdout() + p.stderr());
    assert.deepEqual(
      p
        .stdout()
        .split("\n")
        .filter((l) => l.startsWith("pv-"))
        .map((l) => l.split(/\s+/)),
      // An operator's ALWAYS: the data path of the healthy volume made again.
      [["pv-b", "stub.csi.example.com", handleOf("pv-b"), "HEALED"]],
    );
    assert.equal(stack.heals("pv-b"), before + 1);
    // No warning from Node about a bundled dependency (deprecated built-ins, url.parse).
    assert.deepEqual(
      p
        .stderr()
        .split("\n")
        .filter((l) => l.trim() !== "" && !l.startsWith("{") && !/^\[\d+\/\d+\] /.test(l)),
      [],
    );
  });

  test("an unknown node or a PV not on the node exits 1 with the reason", async () => {
    const r = await heal("--node=node-9");
    assert.equal(r.code, 1);
    assert.match(r.stdout, /no CSIAddonsNode for node node-9/);
    const p = await heal("--node=node-1", "--pv=pv-zzz");
    assert.equal(p.code, 1);
    assert.match(p.stdout, /PersistentVolume pv-zzz is not on node node-1/);
  });
});
