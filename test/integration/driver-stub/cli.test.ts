// The command line of csi-addons-driver-stub, run as a real process.
import assert from "node:assert/strict";
import { lstatSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { parseArgs } from "../../../driver-stub/cli.js";
import { startProgram, tempDir, type Proc } from "../../support/proc.js";
import { stubClients } from "../../support/driver-stub-clients.js";

const packageVersion = (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version;

async function run(args: string[], cwd?: string): Promise<{ code: number | string; stdout: string; stderr: string }> {
  const proc = startProgram("driver-stub", args, cwd === undefined ? {} : { cwd });
  const code = await proc.exited;
  return { code, stdout: proc.stdout(), stderr: proc.stderr() };
}

describe("driver-stub command line", () => {
  const running: Proc[] = [];
  after(() => Promise.all(running.map((p) => p.stop())));

  it("--help prints the usage on stdout and exits 0", async () => {
    const r = await run(["--help"]);
    assert.equal(r.code, 0);
    assert.ok(
      r.stdout.startsWith(
        "Usage: csi-addons-driver-stub --name <driver> --addons-endpoint unix://<path> --csi-endpoint unix://<path> [--state FILE] [--call-log FILE] [--no-boot-id]\n",
      ),
      r.stdout,
    );
    assert.equal(r.stderr, "");
  });

  it("--version prints the package version and exits 0", async () => {
    const r = await run(["--version"]);
    assert.deepEqual(r, { code: 0, stdout: `csi-addons-driver-stub ${packageVersion}\n`, stderr: "" });
  });

  const dir = tempDir("driver-stub-cli-");
  const good = { name: "--name=d", addons: `--addons-endpoint=unix://${dir}/a.sock`, csi: `--csi-endpoint=unix://${dir}/c.sock` };
  const bad: [string, string[], RegExp][] = [
    ["no flags at all", [], /--name is required/],
    ["a missing endpoint", [good.name, good.addons], /--csi-endpoint is required/],
    ["an unknown flag", [good.name, good.addons, good.csi, "--stat=x"], /unknown flag --stat/],
    ["a flag without its value at the end", [good.addons, good.csi, "--name"], /--name needs a value/],
    ["a flag whose value is the next flag", ["--name", good.addons, good.csi], /--name needs a value/],
    ["an empty value", ["--name=", good.addons, good.csi], /--name must not be empty/],
    ["a tcp endpoint", [good.name, "--addons-endpoint=tcp://127.0.0.1:9000", good.csi], /--addons-endpoint: expected unix:\/\/<path>/],
    ["a bare path endpoint", [good.name, good.addons, `--csi-endpoint=${dir}/c.sock`], /--csi-endpoint: expected unix:\/\/<path>/],
    ["one socket for both servers", [good.name, good.addons, `--csi-endpoint=unix://${dir}/a.sock`], /must be different sockets/],
    ["a socket path too long for sun_path", [good.name, `--addons-endpoint=unix://${dir}/${"x".repeat(120)}.sock`, good.csi], /longer than 107 bytes/],
    ["a positional argument", [good.name, good.addons, good.csi, "extra"], /unexpected argument "extra"/],
    ["a value on --help", ["--help=yes"], /--help takes no value/],
  ];
  for (const [what, args, message] of bad) {
    it(`exits 2 with one line on stderr for ${what}`, async () => {
      const r = await run(args);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /^csi-addons-driver-stub: [^\n]+\n$/, "exactly one line");
      assert.match(r.stderr, message);
      assert.equal(r.stdout, "");
      assert.deepEqual(readdirSync(dir), [], "nothing created");
    });
  }

  it("accepts `--flag value` as well as `--flag=value`", async () => {
    const d = tempDir("driver-stub-cli-");
    const proc = startProgram("driver-stub", [
      "--name",
      "spaced",
      "--addons-endpoint",
      `unix://${d}/run/a.sock`,
      `--csi-endpoint=unix://${d}/run/c.sock`,
      "--state",
      `${d}/s.json`,
    ]);
    running.push(proc);
    await proc.waitForOutput(/^driver-stub ready$/m);
    assert.ok(lstatSync(join(d, "run/a.sock")).isSocket(), "the socket directory is created");
    const c = stubClients({ addonsEndpoint: `unix://${d}/run/a.sock`, csiEndpoint: `unix://${d}/run/c.sock` });
    try {
      assert.equal((await c.getIdentity()).name, "spaced");
    } finally {
      c.close();
    }
  });

  it("resolves relative socket and file paths against the working directory", () => {
    const parsed = parseArgs(["--name=d", "--addons-endpoint=unix://run/a.sock", "--csi-endpoint", "unix://c.sock", "--state=s.json", "--call-log", "l.jsonl"]);
    assert.deepEqual(parsed, {
      kind: "run",
      config: {
        name: "d",
        addonsSocket: resolve("run/a.sock"),
        csiSocket: resolve("c.sock"),
        stateFile: resolve("s.json"),
        callLogFile: resolve("l.jsonl"),
      },
    });
  });
});
