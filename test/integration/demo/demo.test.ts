// The demo is a product: `npm run demo` must tell the whole story, exit 0, and leave no process
// behind — also when it is held and then stopped with Ctrl-C, or interrupted half-way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { repoRoot, startTs } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import { alive, pidsIn, processesMentioning } from "../../demo/liveness.js";
import { Story } from "../../demo/story.js";

const DEMO_TIMEOUT_MS = 120_000;

/** The pids the demo said it started, and its working directory. */
function startedByDemo(out: string): { pids: number[]; dir: string } {
  const dir = /working directory[^:]*: (\S+)/.exec(out)?.[1];
  assert.ok(dir, "the demo names its working directory");
  return { pids: pidsIn(out), dir };
}

async function assertNothingLeft(out: string, started = 4): Promise<void> {
  const { pids, dir } = startedByDemo(out);
  assert.ok(pids.length >= started, `the demo names the pids it started: ${pids.join(", ")}`);
  await waitFor("every process the demo started to be gone", () => pids.every((p) => !alive(p)) && processesMentioning(dir).length === 0, {
    timeoutMs: 10_000,
  });
}

test(
  "npm run demo tells the healing story with the real controller healing on its own, checks every step, exits 0 and leaves nothing running",
  { timeout: DEMO_TIMEOUT_MS },
  async () => {
    const child = spawn("npm", ["run", "--silent", "demo"], { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
    assert.equal(code, 0, `demo exit code\n${out}\n${err}`);

    for (const line of [
      /^\[1\/10\] Kubernetes: /m,
      /kubeconfig: \/\S+\.json$/m,
      /caller auth is ON, as in a cluster: TLS .*, a token for this node only \(audience csi-addons-healer\/node-1\), and call csiaddonsnodes\/heal \(per-service RBAC\)/,
      /sidecar log \(JSON lines\): \/\S+sidecar\.log$/m,
      /GetCapabilities .*: Service NODE_SERVICE, VolumeHealer GET_VOLUME_HEALTH, VolumeHealer HEAL_VOLUME$/m,
      /pv-raw +-> volume vol-raw +HEALTHY$/m,
      /GetVolumeHealth pv-shared: (ABNORMAL \(TransportEndpointNotConnected\)|already healed again)/,
      /csi-addons-healer-controller pid \d+, /,
      /^ +controller: HealVolume pv-raw +IF_ABNORMAL -> NOT_NEEDED$/m,
      /handledRestart: "[^"]+" \(this node's history is now known\)$/m,
      /^ +controller: HealVolume pv-shared +IF_ABNORMAL -> HEALED +now HEALTHY$/m,
      /^ +controller: HealVolume pv-postgres +IF_ABNORMAL -> NOT_NEEDED/m,
      /Event on PersistentVolume pv-shared: VolumeHealed: /,
      /killed driver-stub pid \d+/,
      /meanwhile: UNAVAILABLE/,
      /driverRestartedAt: \(none\) -> \d{4}-\d\d-\d\dT[\d:.]+Z$/m,
      /GetIdentity: boot id (\S+) -> (?!\1)\S+$/m,
      /^ +controller: HealVolume pv-raw +ALWAYS -> (HEALED +now HEALTHY|NOT_NEEDED +now HEALTHY \(a periodic pass, retrying since the crash, healed it just before\))$/m,
      /^ +driver back -> last volume healed: \d+ ms \(/m,
      /^ +controller \/metrics: \S+/m,
      /calls on the driver's CSI socket .*: 0$/m,
      /^Summary$/m,
      /^ +pv-shared +vol-shared +xfs, RWX +HEALTHY +NOT_NEEDED +ABNORMAL +HEALED +ABNORMAL +HEALED( \(periodic\))? +HEALTHY$/m,
      /^ +pv-raw +vol-raw +raw block +HEALTHY +NOT_NEEDED +- +NOT_NEEDED +ABNORMAL +HEALED( \(periodic\))? +HEALTHY$/m,
      /^All \d+ checks passed/m,
    ]) {
      assert.match(out, line);
    }
    assert.doesNotMatch(out, /^\s*\{/m, "no JSON log lines on the terminal");
    assert.equal(err, "", "nothing on stderr");
    await assertNothingLeft(out);
    const { dir } = startedByDemo(out);
    assert.match(out, new RegExp(`removed ${dir} `));
    assert.throws(() => readdirSync(dir), /ENOENT/, "the working directory is removed after a good run");
  },
);

test("--hold keeps everything running until Ctrl-C, then stops it all and exits 0", { timeout: DEMO_TIMEOUT_MS }, async () => {
  const demo = startTs("test/demo/demo.ts", ["--hold"]);
  await demo.waitForOutput("Press Ctrl-C to stop.", DEMO_TIMEOUT_MS - 10_000);
  const { pids } = startedByDemo(demo.stdout());
  assert.ok(pids.slice(1).every(alive), "the sidecar, the controller and the restarted driver still run while held");
  demo.child.kill("SIGINT");
  assert.equal(await demo.exited, 0);
  assert.match(demo.stdout(), /SIGINT: stopping everything this run started/);
  await assertNothingLeft(demo.stdout());
});

test("Ctrl-C half-way: everything started so far is stopped, exit 130", { timeout: DEMO_TIMEOUT_MS }, async () => {
  const demo = startTs("test/demo/demo.ts", []);
  await demo.waitForOutput(/sidecar pid \d+/, DEMO_TIMEOUT_MS - 10_000);
  demo.child.kill("SIGINT");
  assert.equal(await demo.exited, 130);
  await assertNothingLeft(demo.stdout(), 2);
  const { dir } = startedByDemo(demo.stdout());
  assert.match(demo.stdout(), new RegExp(`kept ${dir} `), "an interrupted run keeps its logs");
  rmSync(dir, { recursive: true, force: true });
});

test("a failed check ends the story and names its step", async () => {
  const said: string[] = [];
  const story: Story = new Story(2, (l) => said.push(l));
  const outcome = await story.run(async () => {
    story.step("first");
    story.expect(true, "fine");
    story.step("second");
    story.expect(1 > 2, "one is more than two");
    story.step("never reached");
  });
  assert.deepEqual(outcome, { checks: 1, failed: { step: "second", reason: "one is more than two" } });
  assert.deepEqual(said, ["\n[1/2] first", "\n[2/2] second"]);
});
