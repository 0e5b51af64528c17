import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { Readable } from "node:stream";
import { join } from "node:path";
import { stringify } from "yaml";
import { KubeConfigError, inClusterEndpoint, tokenFile } from "../../../../sidecar/kube/endpoint.js";
import { kubeconfigEndpoint } from "../../../../sidecar/kube/kubeconfig.js";
import { KubeTransport, linesOf } from "../../../../sidecar/kube/transport.js";
import { KubeError } from "../../../../sidecar/kube/api.js";
import { answeringApi } from "../../../support/answering-api.js";
import { tempDir } from "../../../support/proc.js";

function kubeconfig(
  dir: string,
  user: Record<string, unknown>,
  cluster: Record<string, unknown> = { server: "https://127.0.0.1:6443" },
  format: "yaml" | "json" = "yaml",
): string {
  const path = join(dir, "kubeconfig");
  writeFileSync(
    path,
    (format === "json" ? (o: unknown) => JSON.stringify(o, null, 2) : stringify)({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster }],
      users: [{ name: "u", user }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
  return path;
}

test("kubeconfig: server, CA data, token", async () => {
  const dir = tempDir();
  const ep = await kubeconfigEndpoint(
    kubeconfig(dir, { token: "t0k" }, { server: "https://api:6443", "certificate-authority-data": Buffer.from("CA").toString("base64") }),
  );
  assert.equal(ep.server.href, "https://api:6443/");
  assert.equal(ep.ca?.toString(), "CA");
  assert.equal(ep.token(), "t0k");
});

test("kubeconfig: the server's certificate is verified unless insecure-skip-tls-verify is true", async () => {
  const skip = async (cluster: Record<string, unknown>) =>
    (await kubeconfigEndpoint(kubeconfig(tempDir(), { token: "t" }, { server: "https://api:6443", ...cluster }))).insecureSkipTlsVerify;
  assert.equal(await skip({}), false);
  assert.equal(await skip({ "insecure-skip-tls-verify": false }), false);
  assert.equal(await skip({ "insecure-skip-tls-verify": true }), true);
});

test("kubeconfig: a JSON kubeconfig gives the same endpoint as the same kubeconfig in YAML", async () => {
  const dir = tempDir();
  const cluster = { server: "https://api:6443", "certificate-authority-data": Buffer.from("CA").toString("base64") };
  const [fromJson, fromYaml] = await Promise.all([
    kubeconfigEndpoint(kubeconfig(tempDir(), { token: "t0k" }, cluster, "json")),
    kubeconfigEndpoint(kubeconfig(dir, { token: "t0k" }, cluster, "yaml")),
  ]);
  assert.deepEqual({ ...fromJson, token: fromJson.token() }, { ...fromYaml, token: fromYaml.token() });
  assert.equal(fromJson.token(), "t0k");
  assert.equal(fromJson.ca?.toString(), "CA");
});

test("kubeconfig: files relative to the kubeconfig, token file, client certificate", async () => {
  const dir = tempDir();
  writeFileSync(join(dir, "ca.crt"), "CAFILE");
  writeFileSync(join(dir, "token"), "from-file\n");
  writeFileSync(join(dir, "c.crt"), "CERT");
  writeFileSync(join(dir, "c.key"), "KEY");
  const ep = await kubeconfigEndpoint(
    kubeconfig(dir, { tokenFile: "token", "client-certificate": "c.crt", "client-key": "c.key" }, { server: "https://api", "certificate-authority": "ca.crt" }),
  );
  assert.equal(ep.ca?.toString(), "CAFILE");
  assert.equal(ep.token(), "from-file");
  assert.equal(ep.cert?.toString(), "CERT");
  assert.equal(ep.key?.toString(), "KEY");
});

test("kubeconfig: exec plugins, auth providers, basic auth and unknown contexts are refused with a clear error", async () => {
  const dir = tempDir();
  for (const user of [{ exec: { command: "aws" } }, { "auth-provider": { name: "oidc" } }, { username: "admin", password: "p" }]) {
    await assert.rejects(
      kubeconfigEndpoint(kubeconfig(dir, user)),
      (e: Error) => e instanceof KubeConfigError && /only token/.test(e.message),
      JSON.stringify(user),
    );
  }
  const path = join(dir, "bad");
  writeFileSync(path, stringify({ contexts: [], "current-context": "nope" }));
  await assert.rejects(kubeconfigEndpoint(path), /context "nope" not found/);
});

test("in-cluster without KUBERNETES_SERVICE_HOST is a clear configuration error", () => {
  assert.throws(() => inClusterEndpoint(undefined, undefined), /not in a cluster/);
});

test("in-cluster: KUBERNETES_SERVICE_HOST and _PORT are both needed; with both, the pod's service account is read", () => {
  for (const [host, port] of [
    [undefined, "443"],
    ["10.96.0.1", undefined],
    ["10.96.0.1", ""],
    ["", "443"],
  ]) {
    assert.throws(
      () => inClusterEndpoint(host, port),
      (e: Error) => e instanceof KubeConfigError && /not in a cluster/.test(e.message),
      `host ${host}, port ${port}`,
    );
  }
  // Past that check the service account's CA and token are read: outside a pod they are missing
  // (not a configuration error of ours); inside one, an IPv6 service address gets its brackets.
  try {
    assert.equal(inClusterEndpoint("fd00:10:96::1", "443").server.href, "https://[fd00:10:96::1]:443/");
  } catch (e) {
    assert.ok(!(e instanceof KubeConfigError), String(e));
    assert.equal((e as NodeJS.ErrnoException).code, "ENOENT");
  }
});

test("a token file is read once a minute, not at every request: a rotated token is used from the next read on", () => {
  const path = join(tempDir(), "token");
  writeFileSync(path, "first\n");
  let clock = 1_000_000;
  const token = tokenFile(path, () => clock);
  assert.equal(token(), "first");
  writeFileSync(path, "rotated\n");
  clock += 59_000;
  assert.equal(token(), "first", "within the minute: the token already read");
  clock += 2_000;
  assert.equal(token(), "rotated", "a minute on: read again");
});

test("a watch the API refuses is a KubeError with the Status's reason and message", async (t) => {
  const status = { kind: "Status", status: "Failure", reason: "Forbidden", message: 'nodes "node-1" is forbidden: cannot watch', code: 403 };
  const transport = await answeringApi(t, () => ({ status: 403, body: JSON.stringify(status) }));
  await assert.rejects(
    transport.watch("/api/v1/nodes?watch=true", AbortSignal.timeout(5_000), () => {}),
    (e: KubeError) => e instanceof KubeError && e.status === 403 && e.reason === "Forbidden" && /cannot watch/.test(e.message),
  );
});

test("a watch's ERROR event ends it as a KubeError with the event's code (410 Expired: list again), else 500", async (t) => {
  let event: unknown;
  const transport = await answeringApi(t, () => ({
    status: 200,
    body: `${JSON.stringify({ type: "ADDED", object: { metadata: { name: "n" } } })}\n${JSON.stringify(event)}\n`,
  }));
  const watchUntilError = async (e: unknown) => {
    event = e;
    const seen: string[] = [];
    const err = await transport
      .watch("/api/v1/nodes?watch=true", AbortSignal.timeout(5_000), (ev) => seen.push(ev.type))
      .then(
        () => undefined,
        (x: unknown) => x,
      );
    assert.deepEqual(seen, ["ADDED"], "the events before the ERROR are delivered");
    return err as KubeError;
  };
  const expired = await watchUntilError({
    type: "ERROR",
    object: { kind: "Status", reason: "Expired", message: "too old resource version: 1 (42)", code: 410 },
  });
  assert.ok(expired instanceof KubeError);
  assert.equal(expired.status, 410);
  assert.equal(expired.reason, "Expired");
  const unnamed = await watchUntilError({ type: "ERROR", object: { kind: "Status", message: "something broke" } });
  assert.ok(unnamed instanceof KubeError);
  assert.equal(unnamed.status, 500);
});

test("an unreachable API server is a KubeError with status 0; a deadline is a Timeout", async () => {
  const t = new KubeTransport({ server: new URL("http://127.0.0.1:1"), token: () => undefined });
  await assert.rejects(
    t.request("GET", "/api", undefined, AbortSignal.timeout(5000)),
    (e: KubeError) => e instanceof KubeError && e.status === 0 && e.reason === "Unavailable",
  );
  const ac = new AbortController();
  ac.abort();
  // No HTTP answer either (status 0): the relay answers it UNAVAILABLE, as it does an unreachable API.
  await assert.rejects(t.request("GET", "/api", undefined, ac.signal), (e: KubeError) => e instanceof KubeError && e.status === 0 && e.reason === "Timeout");
  t.close();
});

test("watch lines: a stream split anywhere (mid-line, inside a UTF-8 character) yields each event whole", async () => {
  const events = [
    { type: "ADDED", object: { metadata: { name: "pv-a", annotations: { note: "café ☕" } } } },
    { type: "MODIFIED", object: { metadata: { name: "pv-b" } } },
    { type: "DELETED", object: { metadata: { name: "pv-c" } } },
  ];
  const bytes = Buffer.from(events.map((e) => JSON.stringify(e)).join("\r\n") + "\n");
  const cut = bytes.indexOf(Buffer.from("☕")) + 1; // inside the 3-byte character
  // objectMode: each Buffer stays one chunk, exactly where it was cut.
  const chunks = Readable.from([bytes.subarray(0, 7), bytes.subarray(7, cut), bytes.subarray(cut)], { objectMode: true });
  const lines: string[] = [];
  for await (const line of linesOf(chunks)) lines.push(line);
  assert.deepEqual(
    lines.map((l) => JSON.parse(l)),
    events,
  );
});
