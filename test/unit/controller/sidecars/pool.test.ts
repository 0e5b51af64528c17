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
import { EndpointRefusedError, type VerifyPolicy } from "../../../../controller/sidecars/verify.js";
import { TokenFile } from "../../../../controller/sidecars/token.js";
import type { SidecarInfo, SidecarPod } from "../../../../controller/plan/types.js";
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
  owners: [DAEMONSET],
  deleting: false,
});

const DAEMONSET = { kind: "DaemonSet", name: "plugin", uid: "ds-uid", controller: true };
/** The node plugin's pod on n1, as the sidecar's CSIAddonsNode describes it. */
const podOnN1 = (ip: string | undefined, o: Partial<SidecarPod> = {}): SidecarPod => ({
  uid: "pod-uid",
  nodeName: "n1",
  ip,
  serviceAccount: "plugin",
  owners: [DAEMONSET],
  ...o,
});

/** Plain host:port endpoints called as they are: these tests are about connections, verify.test about trust. */
const LOCAL: VerifyPolicy = { serviceAccounts: [], allowUnverified: true };

function pool(policy: VerifyPolicy = LOCAL) {
  const ips = new Map<string, string>();
  const pods = new Map<string, Partial<SidecarPod>>();
  const lookups: string[] = [];
  const refusals: string[] = [];
  const kube = {
    sidecarPod: async (namespace: string, pod: string, signal: AbortSignal) => {
      assert.ok(signal instanceof AbortSignal, "every Pod read carries the pass's signal");
      lookups.push(`${namespace}/${pod}`);
      return podOnN1(ips.get(`${namespace}/${pod}`), pods.get(`${namespace}/${pod}`));
    },
  };
  const p = new SidecarPool(kube, {}, () => "token", undefined, { policy, onRefused: (s, err) => refusals.push(`${s.key}: ${err.kind}`) });
  return { p, ips, pods, lookups, refusals };
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
  const { p, ips, pods, lookups } = pool();
  t.after(() => p.close());
  const signal = new AbortController().signal;
  const of = (podUid?: string): SidecarInfo => ({ ...sidecar("pod://plugin-a.csi:9070"), annotations: podUid ? { [CREATED_BY_POD_UID]: podUid } : {} });
  ips.set("csi/plugin-a", "10.1.2.3");
  pods.set("csi/plugin-a", { uid: "uid-1" });
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
  pods.set("csi/plugin-a", { uid: "uid-2" });
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
  assert.deepEqual(p.countByState(), { serving: 2, not_serving: 0, unreachable: 0, failing: 0, unresolved: 1, refused: 0 });
  p.forget("csi/n1");
  assert.deepEqual(p.countByState(), { serving: 1, not_serving: 0, unreachable: 0, failing: 0, unresolved: 1, refused: 0 });
  assert.equal(conn.closed, true);
  // Its CSIAddonsNode made again (same name, same endpoint): a new connection, not the closed one.
  const again = await p.resolve(sidecar("10.0.0.1:9070"), new AbortController().signal);
  assert.notEqual(again, conn);
  assert.equal(again.closed, false);
});

test("pool: a sidecar forgotten while its pod's IP is read gets no connection, which nothing would ever close", async (t) => {
  let answer!: (pod: SidecarPod) => void;
  const kube = { sidecarPod: () => new Promise<SidecarPod>((resolve) => (answer = resolve)) };
  const p = new SidecarPool(kube, {}, () => "token");
  t.after(() => p.close());
  const abort = new AbortController();
  const resolving = p.resolve(sidecar("pod://plugin-a.csi:9070"), abort.signal);
  // Its CSIAddonsNode deleted: the pass is cancelled, then the sidecar forgotten; the Pod read answers late.
  abort.abort();
  p.forget("csi/n1");
  answer(podOnN1("10.1.2.3"));
  await assert.rejects(resolving);
});

test("pool: an endpoint not verified as the claimed node's sidecar gets no connection; told once per reason, counted as refused; the object written right again is called", async (t) => {
  const { p, ips, pods, refusals } = pool({ serviceAccounts: [], allowUnverified: false });
  t.after(() => p.close());
  const signal = new AbortController().signal;
  ips.set("csi/plugin-a", "10.1.2.3");
  const real = await p.resolve(sidecar("pod://plugin-a.csi:9070"), signal);
  // A forged object for n1 at a pod of another node: no connection, the old one closed.
  pods.set("csi/plugin-b", { nodeName: "n2", uid: "pod-b" });
  ips.set("csi/plugin-b", "10.9.9.9");
  for (let i = 0; i < 3; i++) {
    await assert.rejects(
      p.resolve(sidecar("pod://plugin-b.csi:9070"), signal),
      (err: unknown) => err instanceof EndpointRefusedError && err.kind === "node" && /runs on node n2, not on node n1/.test(err.message),
    );
  }
  assert.equal(real.closed, true, "what was connected before the object changed is closed");
  assert.deepEqual(refusals, ["csi/n1: node"], "one refusal told, not one per pass");
  assert.equal(p.countByState().refused, 1);
  // A plain host:port cannot be verified: refused by default (another reason, told again).
  await assert.rejects(p.resolve(sidecar("10.9.9.9:9070"), signal), (err: unknown) => err instanceof EndpointRefusedError && err.kind === "unverifiable");
  assert.deepEqual(refusals, ["csi/n1: node", "csi/n1: unverifiable"]);
  // Its own sidecar writes the object again: called, and a later forgery is told again.
  assert.equal((await p.resolve(sidecar("pod://plugin-a.csi:9070"), signal)).address, "10.1.2.3:9070");
  await assert.rejects(p.resolve(sidecar("pod://plugin-b.csi:9070"), signal));
  assert.deepEqual(refusals, ["csi/n1: node", "csi/n1: unverifiable", "csi/n1: node"]);
});

test("pool: close() forgets every state, also of sidecars that never got a connection", async (t) => {
  const { p } = pool();
  t.after(() => p.close());
  await p.resolve(sidecar("10.0.0.1:9070"), new AbortController().signal);
  p.setState("csi/n1", "serving");
  p.setState("csi/n2", "unresolved");
  p.close();
  assert.deepEqual(p.countByState(), { serving: 0, not_serving: 0, unreachable: 0, failing: 0, unresolved: 0, refused: 0 });
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
