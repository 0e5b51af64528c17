// The sidecar's configuration as the process meets it: a bad flag, --version and --help, and a
// fatal start-up error, each ending the process with its documented exit code and output
// (test/unit/sidecar/config/ parses the flags in process).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { startProgram, tempDir } from "../../support/proc.js";

const base = ["--node-id=n1", "--pod=p", "--namespace=ns", "--enable-auth=false"];

test("the process exits 2 with one stderr line naming the flag, before anything starts", async () => {
  const p = startProgram("sidecar", ["--pod=p", "--namespace=ns", "--controller-port=abc", "--node-id=n"]);
  assert.equal(await p.exited, 2);
  const lines = p.stderr().trim().split("\n");
  assert.equal(lines.length, 1, p.stderr());
  assert.match(lines[0]!, /--controller-port/);
  assert.equal(p.stdout(), "");
});

test("--version and --help exit 0", async () => {
  const v = startProgram("sidecar", ["--version"]);
  assert.equal(await v.exited, 0);
  assert.match(v.stdout(), /^csi-addons-sidecar \d+\.\d+\.\d+/);
  const h = startProgram("sidecar", ["--help"]);
  assert.equal(await h.exited, 0);
  assert.match(h.stdout(), /--csi-addons-address/);
});

test("a fatal start-up error (controller port in use) exits 1 with the reason in the log and --termination-log", async () => {
  const dir = tempDir();
  // Never the host's /dev/termination-log.
  const terminationLog = join(dir, "termination-log");
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
  const port = (blocker.address() as { port: number }).port;
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
  );
  try {
    const p = startProgram(
      "sidecar",
      [...base, "--controller-ip=127.0.0.1", `--controller-port=${port}`, `--kubeconfig=${kubeconfig}`, "--csi-addons-address=unix:///nonexistent/addons.sock"],
      {
        env: { TERMINATION_LOG: terminationLog },
      },
    );
    assert.equal(await p.exited, 1);
    const lines = p
      .stdout()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { level: string; message: string });
    const fatal = lines.find((l) => l.message.startsWith("fatal:"));
    assert.ok(fatal, p.stdout());
    assert.equal(fatal.level, "error");
    assert.match(fatal.message, /EADDRINUSE/);
    assert.equal(readFileSync(terminationLog, "utf8"), `${fatal.message}\n`);
  } finally {
    blocker.close();
  }
});
