// How the controller finds and reaches a sidecar (DESIGN 7.3), in process: the endpoint a
// CSIAddonsNode publishes, the pod IP behind a pod:// endpoint, one connection per sidecar kept
// while its address holds and replaced when it moves, and the bearer token the kubelet rotates in
// place. The process tests (tls-auth, sidecar-down) run the same parts against real sidecars.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EndpointError, parseEndpoint } from "../../../../controller/sidecars/endpoint.js";
import { SidecarPool } from "../../../../controller/sidecars/pool.js";
import { TokenFile } from "../../../../controller/sidecars/token.js";
import type { SidecarInfo } from "../../../../controller/plan/types.js";
import { CREATED_BY_POD_UID } from "../../../../controller/plan/trigger.js";

test("endpoint: pod://<pod>.<namespace>:<port> names a pod; host:port and [ipv6]:port are addresses", () => {
  assert.deepEqual(parseEndpoint("pod://csi-rbdplugin-x7k2p.ceph-csi:9070"), { kind: "pod", pod: "csi-rbdplugin-x7k2p", namespace: "ceph-csi", port: 9070 });
  assert.deepEqual(parseEndpoint("10.0.0.7:9070"), { kind: "address", address: "10.0.0.7:9070" });
  assert.deepEqual(parseEndpoint("node-1.example.com:9070"), { kind: "address", address: "node-1.example.com:9070" });
  assert.deepEqual(parseEndpoint("[fd00::7]:9070"), { kind: "address", address: "[fd00::7]:9070" });
});

test("endpoint: anything else is refused, naming what was published", () => {
  for (const bad of [
    "pod://plugin:9070",
    "pod://Plugin.ns:9070",
    "pod://plugin-.ns:9070",
    "pod://plugin.ns",
    "pod://plugin.ns:123456",
    "10.0.0.7",
    "unix:///csi/csi-addons.sock",
    "",
  ]) {
    assert.throws(
      () => parseEndpoint(bad),
      (err: unknown) => err instanceof EndpointError && err.message.includes(JSON.stringify(bad)) && /pod:\/\/<pod>\.<namespace>:<port>/.test(err.message),
      bad,
    );
  }
});

const sidecar = (endpoint: string, key = "csi/n1"): SidecarInfo => ({
  key,
  namespace: "csi",
  name: key.split("/")[1]!,
  uid: "u",
  driver: "drv",
  endpoint,
  nodeId: "n1",
  annotations: {},
  deleting: false,
});

function pool() {
  const ips = new Map<string, string>();
  const lookups: string[] = [];
  const kube = {
    podIP: async (namespace: string, pod: string, signal: AbortSignal) => {
      assert.ok(signal instanceof AbortSignal, "every Pod read carries the pass's signal");
      lookups.push(`${namespace}/${pod}`);
      return ips.get(`${namespace}/${pod}`);
    },
  };
  const p = new SidecarPool(kube, {}, () => "token");
  return { p, ips, lookups };
}

test("pool: a pod:// endpoint is the pod's IP (IPv6 in brackets); a pod without an IP yet is an error naming it", async (t) => {
  const { p, ips, lookups } = pool();
  t.after(() => p.close());
  const signal = new AbortController().signal;
  await assert.rejects(p.resolve(sidecar("pod://plugin-a.csi:9070"), signal), /pod csi\/plugin-a has no IP yet/);
  ips.set("csi/plugin-a", "10.1.2.3");
  assert.equal((await p.resolve(sidecar("pod://plugin-a.csi:9070"), signal)).address, "10.1.2.3:9070");
  ips.set("csi/plugin-a", "fd00::3");
  assert.equal((await p.resolve(sidecar("pod://plugin-a.csi:9070"), signal)).address, "[fd00::3]:9070");
  assert.deepEqual(lookups, ["csi/plugin-a", "csi/plugin-a", "csi/plugin-a"]);
  assert.equal((await p.resolve(sidecar("10.9.9.9:9070", "csi/n2"), signal)).address, "10.9.9.9:9070");
  assert.equal(lookups.length, 3, "a plain address needs no Pod read");
});

test("pool: one connection per sidecar while its address holds; a new pod IP or endpoint replaces it and closes the old one", async (t) => {
  const { p, ips } = pool();
  t.after(() => p.close());
  const signal = new AbortController().signal;
  ips.set("csi/plugin-a", "10.1.2.3");
  const first = await p.resolve(sidecar("pod://plugin-a.csi:9070"), signal);
  assert.equal(await p.resolve(sidecar("pod://plugin-a.csi:9070"), signal), first, "the same connection again");
  const other = await p.resolve(sidecar("pod://plugin-a.csi:9070", "csi/n2"), signal);
  assert.notEqual(other, first, "another sidecar has its own");

  ips.set("csi/plugin-a", "10.1.2.4"); // the node-plugin pod came back with a new IP
  const moved = await p.resolve(sidecar("pod://plugin-a.csi:9070"), signal);
  assert.notEqual(moved, first);
  assert.equal(moved.address, "10.1.2.4:9070");
  assert.equal(first.closed, true, "the old connection is closed");

  const published = await p.resolve(sidecar("10.1.2.4:9070"), signal); // same address, another endpoint text
  assert.notEqual(published, moved);
  assert.equal(other.closed, false, "the other sidecar's connection is left alone");
});

test("pool: a pod keeps its IP for life: a sidecar last found SERVING whose CSIAddonsNode names the same pod (createdByPodUID) is not looked up again; a new pod, an unreachable sidecar or no pod named is", async (t) => {
  const { p, ips, lookups } = pool();
  t.after(() => p.close());
  const signal = new AbortController().signal;
  const of = (podUid?: string): SidecarInfo => ({ ...sidecar("pod://plugin-a.csi:9070"), annotations: podUid ? { [CREATED_BY_POD_UID]: podUid } : {} });
  ips.set("csi/plugin-a", "10.1.2.3");
  const first = await p.resolve(of("uid-1"), signal);
  await p.resolve(of("uid-1"), signal);
  assert.equal(lookups.length, 2, "not known to be SERVING yet: read again");
  p.setState("csi/n1", "serving");
  assert.equal(await p.resolve(of("uid-1"), signal), first, "a pass after a driver restart, or a periodic one: the same pod");
  assert.equal(lookups.length, 2);
  p.setState("csi/n1", "not_serving");
  await p.resolve(of("uid-1"), signal);
  assert.equal(lookups.length, 3, "unreachable: its pod may be gone");
  p.setState("csi/n1", "serving");
  // A pod made again under the same name (a StatefulSet's, or one deleted by hand): a new UID, a new IP.
  ips.set("csi/plugin-a", "10.1.2.4");
  const again = await p.resolve(of("uid-2"), signal);
  assert.equal(again.address, "10.1.2.4:9070");
  assert.equal(lookups.length, 4);
  await p.resolve(of(), signal);
  await p.resolve(of(), signal);
  assert.equal(lookups.length, 6, "without the annotation the pod is read each time");
});

test("pool: connection states are counted per sidecar, and a forgotten sidecar is closed and no longer counted", async (t) => {
  const { p } = pool();
  t.after(() => p.close());
  const conn = await p.resolve(sidecar("10.0.0.1:9070"), new AbortController().signal);
  p.setState("csi/n1", "not_serving");
  p.setState("csi/n2", "unresolved");
  p.setState("csi/n3", "serving");
  p.setState("csi/n1", "serving");
  assert.deepEqual(p.countByState(), { serving: 2, not_serving: 0, unreachable: 0, failing: 0, unresolved: 1 });
  p.forget("csi/n1");
  assert.deepEqual(p.countByState(), { serving: 1, not_serving: 0, unreachable: 0, failing: 0, unresolved: 1 });
  assert.equal(conn.closed, true);
  // Its CSIAddonsNode made again (same name, same endpoint): a new connection, not the closed one.
  const again = await p.resolve(sidecar("10.0.0.1:9070"), new AbortController().signal);
  assert.notEqual(again, conn);
  assert.equal(again.closed, false);
});

test("pool: a sidecar forgotten while its pod's IP is read gets no connection, which nothing would ever close", async (t) => {
  let answer!: (ip: string) => void;
  const kube = { podIP: () => new Promise<string | undefined>((resolve) => (answer = resolve)) };
  const p = new SidecarPool(kube, {}, () => "token");
  t.after(() => p.close());
  const abort = new AbortController();
  const resolving = p.resolve(sidecar("pod://plugin-a.csi:9070"), abort.signal);
  // Its CSIAddonsNode deleted: the pass is cancelled, then the sidecar forgotten; the Pod read answers late.
  abort.abort();
  p.forget("csi/n1");
  answer("10.1.2.3");
  await assert.rejects(resolving);
});

test("pool: close() forgets every state, also of sidecars that never got a connection", async (t) => {
  const { p } = pool();
  t.after(() => p.close());
  await p.resolve(sidecar("10.0.0.1:9070"), new AbortController().signal);
  p.setState("csi/n1", "serving");
  p.setState("csi/n2", "unresolved");
  p.close();
  assert.deepEqual(p.countByState(), { serving: 0, not_serving: 0, unreachable: 0, failing: 0, unresolved: 0 });
});

test("token: read and trimmed; a rotated file is read again; while it is briefly missing, the last good token stays", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "token-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, "token");
  writeFileSync(path, "first-token\n");
  const token = new TokenFile(path);
  assert.equal(token.read(), "first-token");
  // The kubelet writes projected volumes atomically: a new file renamed over the old one.
  writeFileSync(join(dir, "next"), "second-token-which-is-longer\n");
  renameSync(join(dir, "next"), path);
  assert.equal(token.read(), "second-token-which-is-longer");
  rmSync(path);
  assert.equal(token.read(), "second-token-which-is-longer");
});

test("token: a file that cannot be read at all names the flag, the path and the reason, never a token", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "token-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const token = new TokenFile(join(dir, "missing"));
  assert.throws(() => token.read(), { message: `cannot read --token-file ${join(dir, "missing")}: ENOENT` });
});
