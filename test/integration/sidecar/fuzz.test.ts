// Bad input: thousands of hostile requests, from a fixed seed, against two sidecars — one
// with auth off (plaintext) and one with auth on (TLS, bearer tokens). Random bytes on the port
// (before and after a TLS handshake), HTTP/2 frames and gRPC framing with garbage, bad and
// oversized PV names, random protobuf bodies, bad tokens, huge metadata, unknown methods.
// Every gRPC call must get the exact status its class calls for; afterwards both sidecars still
// run and answer, nothing reached the driver, and their logs are JSON lines without a token.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { gzipSync } from "node:zlib";
import * as grpc from "@grpc/grpc-js";
import { startKubeApi, type KubeApi } from "../../kube/index.js";
import { startDriverStub, type DriverStub } from "../../support/driver-stub.js";
import { startSidecarProc, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import { rawUnary } from "../../support/grpc.js";
import { baseObjects, pv, upstreamCrdFile, volumeAttachment } from "../../support/fixtures.js";
import { GetVolumeHealthRequest, HealVolumeRequest } from "../../../proto/gen/sidecar/v1/healer.js";
import { FAILED_BURST, FAILED_PER_SECOND } from "../../../sidecar/auth/review-budget.js";
import {
  AUDIENCE,
  HEALER_USER,
  TLS_CLIENT_OPTIONS,
  allowHealer,
  authArgs,
  checkHealth,
  makeTlsFiles,
  tlsCredentials,
  type TlsFiles,
} from "../../support/secure-sidecar.js";
import { reasonFor } from "../../support/heal-request.js";

const SEED = 0x1bad5eed;
const VALID_TOKEN = "fz-valid-token-5b0e7f3c9a1d";
const EXPIRED_TOKEN = "fz-expired-token-2c4e6a8b";
const OTHER_AUDIENCE_TOKEN = "fz-audience-token-7d9f1b3e";
const NOT_ALLOWED_TOKEN = "fz-bob-token-4a6c8e0f";
/** Every generated token carries this, so one search of the logs covers them all. */
const TOKEN_MARKER = "fzTok";
const METHODS = { health: "/sidecar.v1.VolumeHealer/GetVolumeHealth", heal: "/sidecar.v1.VolumeHealer/HealVolume" };
/** grpc-server.ts: upstream's limit, which the upstream services need (a volume group of ~1000 ids). */
const MAX_MESSAGE = 4 * 1024 * 1024;
const MAX_METADATA = 16 * 1024;
/** A PV attached on both sidecars' nodes: any hostile call that got through would reach the driver. */
const REAL_PV = "pv-real";

// ---- a tiny seeded PRNG (mulberry32); every input i of class c has its own stream ---------------

interface Rng {
  next(): number;
  int(n: number): number;
  range(lo: number, hi: number): number;
  chance(p: number): boolean;
  pick<T>(xs: readonly T[]): T;
  bytes(n: number): Buffer;
  ascii(n: number, alphabet?: string): string;
}

function rng(seed: number): Rng {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const PRINTABLE = Array.from({ length: 94 }, (_, i) => String.fromCharCode(33 + i)).join("");
  return {
    next,
    int,
    range: (lo, hi) => lo + int(hi - lo + 1),
    chance: (p) => next() < p,
    pick: (xs) => xs[int(xs.length)]!,
    // Filled in place: a 4 MiB input built through an array of numbers held the test's own event
    // loop for seconds, and the calls in flight beside it ran out their deadlines on a busy machine.
    bytes: (n) => {
      const b = Buffer.allocUnsafe(n);
      for (let i = 0; i < n; i++) b[i] = int(256);
      return b;
    },
    ascii: (n, alphabet = PRINTABLE) => {
      const b = Buffer.allocUnsafe(n);
      for (let i = 0; i < n; i++) b[i] = alphabet.charCodeAt(int(alphabet.length));
      return b.toString("latin1");
    },
  };
}

const streamOf = (cls: string, i: number) => {
  let h = SEED ^ i;
  for (const ch of cls) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193);
  return rng(Math.imul(h ^ (i * 0x9e3779b1), 0x85ebca6b));
};

// ---- the loop: bounded by count, and past a floor by time; a mismatch is kept, not thrown ---------------------

interface Mismatch {
  cls: string;
  i: number;
  what: string;
}

async function fuzz(
  cls: string,
  opts: { count: number; ms: number; concurrency: number },
  one: (r: Rng, i: number) => Promise<string | undefined>,
): Promise<number> {
  const deadline = Date.now() + opts.ms;
  const mismatches: Mismatch[] = [];
  let next = 0;
  let done = 0;
  // The time bound trims a class's tail on a slow machine; it never cuts a class below its floor,
  // so how many inputs are tried depends on the count, not on the machine's pace.
  const floor = Math.min(opts.count, 50);
  const worker = async () => {
    while (next < opts.count && (next < floor || Date.now() < deadline)) {
      const i = next++;
      const what = await one(streamOf(cls, i), i);
      if (what !== undefined) mismatches.push({ cls, i, what });
      done++;
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  totals.set(cls, done);
  assert.deepEqual(mismatches.slice(0, 5), [], `${mismatches.length} of ${done} inputs of "${cls}" (seed ${SEED}) were not answered as their class requires`);
  assert.ok(done >= floor, `"${cls}": ${done} of the ${floor} inputs every class tries were answered`);
  return done;
}

const totals = new Map<string, number>();

/** undefined when the outcome is the expected one, else a description for the failure message. */
function expectCode(got: { code: grpc.status; details: string }, want: grpc.status, input: string): string | undefined {
  return got.code === want ? undefined : `${input}: got ${grpc.status[got.code]} (${got.details}), want ${grpc.status[want]}`;
}

/** The review budget's refusal (review-budget.ts): a token never seen valid, while invalid ones flood in. */
const BUDGET_SPENT = /^too many invalid tokens lately/;

/** A token the sidecar must review: `want`, or the budget's refusal once invalid tokens have spent it. */
function expectReviewed(got: { code: grpc.status; details: string }, want: grpc.status, input: string): string | undefined {
  if (got.code === grpc.status.RESOURCE_EXHAUSTED && BUDGET_SPENT.test(got.details)) return undefined;
  return expectCode(got, want, input);
}

const show = (s: string) => (s.length > 80 ? `${JSON.stringify(s.slice(0, 80))}… (${s.length} chars)` : JSON.stringify(s));

// ---- the world: one API server, one driver, two sidecars -----------------------------------------

interface Target {
  name: string;
  sidecar: SidecarProc;
  tls: boolean;
  creds: () => grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
  /** Metadata of an allowed caller. */
  allowed: Record<string, string>;
}

let kube: KubeApi;
let stub: DriverStub;
let tlsFiles: TlsFiles;
let off: Target;
let on: Target;
let driverCallsBefore = 0;
const clients: grpc.Client[] = [];

function client(t: Target, isolated = false): grpc.Client {
  // An isolated channel for inputs that may wreck their own connection, so others never share it.
  const c = new grpc.Client(t.sidecar.address, t.creds(), { ...t.options, ...(isolated ? { "grpc.use_local_subchannel_pool": 1 } : {}) });
  clients.push(c);
  return c;
}

const healerDriverCalls = () => stub.calls({ server: "addons" }).filter((c) => /NodeGetVolumeHealth|NodeHealVolume/.test(c.method)).length;
const allDriverCalls = () => stub.calls().length;

async function assertAlive(t: Target): Promise<void> {
  assert.equal(t.sidecar.proc.child.exitCode, null, `${t.name}: the sidecar is still running`);
  assert.equal(t.sidecar.proc.child.signalCode, null, `${t.name}: the sidecar was not killed`);
  assert.equal(await checkHealth(t.sidecar.address, t.creds(), t.options), "SERVING", `${t.name}: health still answers SERVING`);
  assert.equal((await fetch(`http://127.0.0.1:${t.sidecar.httpPort}/healthz`)).status, 200, `${t.name}: /healthz answers`);
}

// ---- generators ----------------------------------------------------------------------------------

const DNS1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const validName = (s: string) => s.length > 0 && s.length <= 253 && DNS1123.test(s);

const BAD_PIECES = [
  "../",
  "..",
  "/etc/passwd",
  "..\\..\\windows",
  "%2e%2e%2f",
  "/",
  "\0",
  "a\0b",
  "\n",
  "\r\n",
  "\t",
  " ",
  "A",
  "PV",
  "Ü",
  "名前",
  "😀",
  "\u202e",
  "\ud800",
  "\udfff",
  "\ufeff",
  "\u00a0",
  "_",
  "*",
  "?",
  "$(id)",
  "`id`",
  ";rm -rf /",
  "\\",
  ":",
  "@",
  "#",
  "-",
  ".",
  "..x",
  "-x",
  "x-",
  "x_y",
  "\u0085",
  "\x7f",
  "'",
  '"',
  "<script>",
  "{{.}}",
  "%s%n",
  "\u0130",
];

/** A name the DESIGN's DNS-1123 rule refuses: traversal, NUL, unicode, control characters, or too long. */
function badName(r: Rng): string {
  const kind = r.int(10);
  if (kind === 0) return "";
  if (kind === 1) return r.ascii(r.range(254, 5_000), "abcdefghijklmnopqrstuvwxyz0123456789-.");
  if (kind === 2) return r.ascii(r.range(5_000, 60_000), "abcdefghijklmnopqrstuvwxyz");
  if (kind === 3) return Array.from({ length: r.range(1, 2_000) }, () => r.pick(BAD_PIECES)).join("");
  let s = Array.from({ length: r.range(1, 6) }, () =>
    r.chance(0.5) ? r.ascii(r.range(1, 12), "abcdefghijklmnopqrstuvwxyz0123456789") : r.pick(BAD_PIECES),
  ).join(r.pick(["", ".", "-", "/"]));
  while (validName(s)) s += r.pick(BAD_PIECES);
  return s;
}

/** Random bytes, or bytes shaped like a request: a field-1 string of random bytes, random tags and varints. */
function randomBody(r: Rng): Buffer {
  if (r.chance(0.4)) return r.bytes(r.range(0, 600));
  const parts: Buffer[] = [];
  for (let n = r.range(1, 4); n > 0; n--) {
    const field = r.chance(0.7) ? r.range(1, 2) : r.range(1, 2000);
    const wire = r.chance(0.8) ? (field === 2 ? 0 : 2) : r.int(8);
    const tag = varint(field * 8 + wire);
    if (wire === 2) {
      const value = r.chance(0.2) ? Buffer.from(r.ascii(r.range(1, 20), "abcdefghijklmnopqrstuvwxyz0123456789-.")) : r.bytes(r.range(0, 300));
      const len = r.chance(0.9) ? value.length : r.int(1_000_000);
      parts.push(tag, varint(len), value);
    } else if (wire === 0) parts.push(tag, varint(r.chance(0.5) ? r.int(3) : r.int(2 ** 31)));
    else parts.push(tag, r.bytes(r.range(0, 12)));
  }
  return Buffer.concat(parts);
}

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 127) {
    out.push((n & 127) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

/** What the sidecar must answer for a body: grpc-js fails to decode it (INTERNAL), else our validation decides. */
function expectedForBody(path: string, body: Buffer, hasValidToken: boolean, authOn: boolean): grpc.status {
  let pvName: string;
  let mode = 1;
  let reason = 1;
  try {
    if (path === METHODS.heal) ({ pvName, mode, reason } = HealVolumeRequest.decode(body));
    else pvName = GetVolumeHealthRequest.decode(body).pvName;
  } catch {
    return grpc.status.INTERNAL;
  }
  if (authOn && !hasValidToken) return grpc.status.UNAUTHENTICATED;
  // A mode other than ALWAYS (1) and IF_ABNORMAL (2), or a reason other than 1..3, is refused
  // like a bad name: 0 is a field left out.
  if (!validName(pvName) || (mode !== 1 && mode !== 2) || !(reason >= 1 && reason <= 3)) return grpc.status.INVALID_ARGUMENT;
  return pvName === REAL_PV ? grpc.status.OK : grpc.status.NOT_FOUND;
}

const encodeHealth = (pvName: string) => Buffer.from(GetVolumeHealthRequest.encode({ pvName }).finish());
const encodeHeal = (pvName: string, mode: number, reason: number = reasonFor(mode)) => Buffer.from(HealVolumeRequest.encode({ pvName, mode, reason }).finish());

// ---- raw connections -------------------------------------------------------------------------------

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

function h2Frame(type: number, flags: number, stream: number, payload: Buffer, length = payload.length): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(length & 0xffffff, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([h, payload]);
}

/**
 * Opens a connection (TLS handshake first when asked), writes the chunks, half-closes, and waits
 * until the server has closed its side too. Resolves "closed" or "left open".
 */
function exchange(port: number, tls: boolean, chunks: Buffer[], timeoutMs = 5_000): Promise<"closed" | "left open"> {
  return new Promise((resolve) => {
    const sock: Socket = tls
      ? tlsConnect({ host: "127.0.0.1", port, servername: "localhost", rejectUnauthorized: false, ALPNProtocols: ["h2"] })
      : netConnect(port, "127.0.0.1");
    let settled = false;
    const finish = (how: "closed" | "left open") => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(how);
    };
    const timer = setTimeout(() => finish("left open"), timeoutMs);
    sock.on("error", () => {}); // resets and failed handshakes are the expected answers
    sock.on("data", () => {});
    sock.on("close", () => finish("closed"));
    sock.once(tls ? "secureConnect" : "connect", () => {
      for (const c of chunks) sock.write(c);
      sock.end();
    });
  });
}

/** Random bytes, sometimes starting like something the server knows (a preface, a TLS record, HTTP/1). */
function randomStream(r: Rng): Buffer[] {
  const lead = r.pick([
    Buffer.alloc(0),
    PREFACE.subarray(0, r.range(1, PREFACE.length)),
    PREFACE,
    Buffer.from([0x16, 0x03, r.int(5)]),
    Buffer.from(
      `${r.pick(["GET", "POST", "PRI", "CONNECT"])} /${r.ascii(r.range(0, 40))} HTTP/1.1\r\nHost: x\r\n${r.chance(0.5) ? "Upgrade: h2c\r\n" : ""}\r\n`,
    ),
  ]);
  const chunks: Buffer[] = [lead];
  for (let n = r.range(1, 3); n > 0; n--) chunks.push(r.bytes(r.range(0, 1_500)));
  return chunks;
}

function randomFrames(r: Rng): Buffer[] {
  const frames: Buffer[] = [PREFACE];
  if (r.chance(0.8)) frames.push(h2Frame(4, 0, 0, Buffer.alloc(0))); // SETTINGS
  for (let n = r.range(1, 8); n > 0; n--) {
    const payload = r.bytes(r.range(0, 600));
    const length = r.chance(0.85) ? payload.length : r.int(1 << 24);
    frames.push(h2Frame(r.chance(0.8) ? r.int(10) : r.int(256), r.int(256), r.chance(0.3) ? 0 : r.range(1, 2 ** 31 - 1), payload, length));
  }
  return frames;
}

// ---- well-formed HTTP/2 requests with bad gRPC framing -----------------------------------------

interface H2Outcome {
  http: number;
  grpc?: number;
  message?: string;
  failure?: string;
}

function grpcMessage(payload: Buffer, compressed = 0, declared = payload.length): Buffer {
  const h = Buffer.alloc(5);
  h[0] = compressed;
  h.writeUInt32BE(declared >>> 0, 1);
  return Buffer.concat([h, payload]);
}

function h2Request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body: Buffer): Promise<H2Outcome> {
  return new Promise((resolve) => {
    const out: H2Outcome = { http: 0 };
    let settled = false;
    const finish = (failure?: string) => {
      if (settled) return;
      settled = true;
      if (failure) out.failure = failure;
      resolve(out);
    };
    let req: http2.ClientHttp2Stream;
    try {
      req = session.request({ ":method": "POST", ":path": METHODS.health, "content-type": "application/grpc", te: "trailers", ...headers });
    } catch (err) {
      return finish(`request not sent: ${(err as Error).message}`);
    }
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h[":status"] !== undefined) out.http = Number(h[":status"]);
      if (h["grpc-status"] !== undefined) out.grpc = Number(h["grpc-status"]);
      if (h["grpc-message"] !== undefined) out.message = decodeURIComponent(String(h["grpc-message"]));
    };
    req.on("response", take);
    req.on("trailers", take);
    req.on("data", () => {});
    req.on("error", (err) => finish(`stream error: ${err.message}`));
    req.on("close", () => finish(out.http === 0 ? `closed without an answer (RST ${req.rstCode})` : undefined));
    req.setTimeout(10_000, () => {
      req.close();
      finish("no answer within 10 s");
    });
    req.end(body);
  });
}

type FramingCase = { name: string; headers: http2.OutgoingHttpHeaders; body: Buffer; http: number; grpc?: grpc.status };

function framingCase(r: Rng): FramingCase {
  const valid = encodeHealth(r.ascii(r.range(1, 20), "abcdefghijklmnopqrstuvwxyz"));
  switch (r.int(10)) {
    case 0:
      return { name: "no message", headers: {}, body: Buffer.alloc(0), http: 200, grpc: grpc.status.UNIMPLEMENTED };
    case 1: {
      const declared = r.range(2, 60_000);
      return {
        name: "truncated message",
        headers: {},
        body: grpcMessage(r.bytes(r.int(Math.min(declared, 2_000))), 0, declared),
        http: 200,
        grpc: grpc.status.UNIMPLEMENTED,
      };
    }
    case 2:
      return { name: "partial length prefix", headers: {}, body: r.bytes(r.range(1, 4)), http: 200, grpc: grpc.status.UNIMPLEMENTED };
    case 3:
      return {
        name: "declared length over the limit",
        headers: {},
        body: grpcMessage(r.bytes(r.range(0, 100)), 0, r.range(MAX_MESSAGE + 1, 2 ** 32 - 1)),
        http: 200,
        grpc: grpc.status.RESOURCE_EXHAUSTED,
      };
    case 4:
      return {
        name: "two messages in a unary call",
        headers: {},
        body: Buffer.concat([grpcMessage(valid), grpcMessage(valid)]),
        http: 200,
        grpc: grpc.status.UNIMPLEMENTED,
      };
    case 5: {
      const encoding = r.pick(["br", "zstd", "snappy", `x-${r.ascii(r.range(1, 10), "abcdefghijklmnopqrstuvwxyz")}`]);
      return {
        name: `compressed with unsupported "${encoding}"`,
        headers: { "grpc-encoding": encoding },
        body: grpcMessage(r.bytes(r.range(0, 200)), 1),
        http: 200,
        grpc: grpc.status.UNIMPLEMENTED,
      };
    }
    case 6: {
      const junk = r.bytes(r.range(1, 500));
      junk[0] = 0x00; // never the gzip magic
      return { name: "gzip flag on garbage", headers: { "grpc-encoding": "gzip" }, body: grpcMessage(junk, 1), http: 200, grpc: grpc.status.INTERNAL };
    }
    case 7: {
      const bomb = gzipSync(Buffer.alloc(r.range(MAX_MESSAGE + 1, 2 * MAX_MESSAGE)));
      return { name: "gzip bomb", headers: { "grpc-encoding": "gzip" }, body: grpcMessage(bomb, 1), http: 200, grpc: grpc.status.RESOURCE_EXHAUSTED };
    }
    case 8:
      return {
        name: "invalid grpc-timeout",
        headers: { "grpc-timeout": r.ascii(r.range(1, 12), "abcdefghijklmnopqrstuvwxyz!?-") },
        body: grpcMessage(valid),
        http: 200,
        grpc: grpc.status.INTERNAL,
      };
    default:
      return {
        name: "not a gRPC content-type",
        headers: { "content-type": r.pick(["text/plain", "application/json", "application/x-www-form-urlencoded", "image/png"]) },
        body: grpcMessage(valid),
        http: 415,
      };
  }
}

// ---- the tests -------------------------------------------------------------------------------------

describe("hostile input: the sidecar never crashes, answers each request with the right code, and nothing reaches the driver", () => {
  before(async () => {
    kube = await startKubeApi({
      tls: true,
      crdFiles: [upstreamCrdFile],
      seed: [
        ...baseObjects(),
        { apiVersion: "v1", kind: "Node", metadata: { name: "node-2" } },
        pv(REAL_PV, { handle: "vol-real" }),
        volumeAttachment(REAL_PV, "vol-real"),
        volumeAttachment(REAL_PV, "vol-real", { nodeName: "node-2" }),
      ],
    });
    kube.auth.addToken(VALID_TOKEN, { username: HEALER_USER, audiences: [AUDIENCE] });
    kube.auth.addToken(EXPIRED_TOKEN, { username: HEALER_USER, audiences: [AUDIENCE], expired: true });
    kube.auth.addToken(OTHER_AUDIENCE_TOKEN, { username: HEALER_USER, audiences: ["https://kubernetes.default.svc"] });
    kube.auth.addToken(NOT_ALLOWED_TOKEN, { username: "bob", audiences: [AUDIENCE] });
    allowHealer(kube);
    const dir = tempDir();
    tlsFiles = await makeTlsFiles(dir);
    stub = await startDriverStub({ dir, state: { volumes: { "vol-real": { state: "HEALTHY" } } } });
    // Two nodes, so the two sidecars keep two CSIAddonsNodes and never fight over one.
    const [plain, secure] = await Promise.all([
      startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath }),
      startSidecarProc({ driverSocket: stub.addonsSocket, kubeconfig: kube.kubeconfigPath, nodeId: "node-2", args: authArgs(AUDIENCE, tlsFiles) }),
    ]);
    off = { name: "auth off", sidecar: plain, tls: false, creds: () => grpc.credentials.createInsecure(), options: {}, allowed: {} };
    on = {
      name: "auth on",
      sidecar: secure,
      tls: true,
      creds: () => tlsCredentials(tlsFiles),
      options: TLS_CLIENT_OPTIONS,
      allowed: { authorization: `Bearer ${VALID_TOKEN}` },
    };
    for (const t of [off, on]) {
      await waitFor(`${t.name} SERVING`, async () => (await checkHealth(t.sidecar.address, t.creds(), t.options)) === "SERVING", { timeoutMs: 20_000 });
      // Control: an allowed caller's request does reach the driver.
      const r = await rawUnary(client(t), METHODS.health, encodeHealth(REAL_PV), t.allowed);
      assert.equal(r.code, grpc.status.OK, `${t.name}: control call: ${r.details}`);
    }
    await waitFor("the control calls in the driver's call log", () => healerDriverCalls() === 2);
    driverCallsBefore = allDriverCalls();
  });

  after(async () => {
    for (const c of clients) c.close();
    await Promise.all([off?.sidecar.stop(), on?.sidecar.stop()]);
    await stub?.stop();
    await kube?.stop();
    const sum = [...totals.values()].reduce((a, b) => a + b, 0);
    console.log(`# fuzz: ${sum} hostile inputs (seed ${SEED}): ${[...totals].map(([k, v]) => `${k} ${v}`).join(", ")}`);
  });

  test("random bytes on the controller port (plaintext, and before a TLS handshake): every connection is closed by the sidecar", async () => {
    for (const t of [off, on]) {
      await fuzz(`raw bytes, ${t.name}`, { count: 300, ms: 40_000, concurrency: 16 }, async (r, i) => {
        const how = await exchange(t.sidecar.port, false, randomStream(r));
        return how === "closed" ? undefined : `connection ${i} left open after the client's FIN`;
      });
      await assertAlive(t);
    }
  });

  test("random bytes after a completed TLS handshake", async () => {
    await fuzz("bytes after TLS handshake", { count: 300, ms: 40_000, concurrency: 16 }, async (r, i) => {
      const how = await exchange(on.sidecar.port, true, randomStream(r));
      return how === "closed" ? undefined : `connection ${i} left open after the client's FIN`;
    });
    await assertAlive(on);
  });

  test("HTTP/2 frames with garbage (random types, flags, streams, lengths, payloads)", async (ctx) => {
    for (const t of [off, on]) {
      // Some sequences (a valid SETTINGS, then frames nghttp2 does not reject at once) leave the
      // connection open after the client's FIN: node:http2's own behaviour, the same without
      // grpc-js. Not a crash, and no worse than a client that keeps its connection open.
      let leftOpen = 0;
      const done = await fuzz(`garbage HTTP/2 frames, ${t.name}`, { count: 200, ms: 40_000, concurrency: 16 }, async (r) => {
        if ((await exchange(t.sidecar.port, t.tls, randomFrames(r), 1_000)) === "left open") leftOpen++;
        return undefined;
      });
      ctx.diagnostic(`${t.name}: ${leftOpen} of ${done} connections were still open 1 s after the client's FIN`);
      await assertAlive(t);
    }
  });

  test("well-formed HTTP/2 with bad gRPC framing: each class gets its exact answer", async () => {
    for (const t of [off, on]) {
      let session: http2.ClientHttp2Session | undefined;
      const open = () => {
        if (session && !session.closed && !session.destroyed) return session;
        const s = http2.connect(t.tls ? `https://127.0.0.1:${t.sidecar.port}` : `http://127.0.0.1:${t.sidecar.port}`, {
          rejectUnauthorized: false,
          servername: "localhost",
        });
        s.on("error", () => {});
        return (session = s);
      };
      try {
        await fuzz(`gRPC framing, ${t.name}`, { count: 300, ms: 40_000, concurrency: 8 }, async (r) => {
          const c = framingCase(r);
          const got = await h2Request(open(), c.headers, c.body);
          if (got.failure || got.http !== c.http || got.grpc !== c.grpc) {
            return `${c.name}: got HTTP ${got.http} grpc-status ${got.grpc} (${got.message ?? got.failure}), want HTTP ${c.http} grpc-status ${c.grpc}`;
          }
          return undefined;
        });
      } finally {
        session?.destroy();
      }
      await assertAlive(t);
    }
  });

  test("bad PV names (traversal, NUL, unicode, control characters, too long) → INVALID_ARGUMENT; over 4 MiB → RESOURCE_EXHAUSTED", async () => {
    for (const t of [off, on]) {
      const c = client(t);
      await fuzz(`bad PV names, ${t.name}`, { count: 500, ms: 40_000, concurrency: 16 }, async (r) => {
        const name = badName(r);
        const heal = r.chance(0.5);
        const body = heal ? encodeHeal(name, r.pick([0, 1, 2, 99, -1]), r.pick([0, 1, 2, 3, 3, 7])) : encodeHealth(name);
        const want = body.length > MAX_MESSAGE ? grpc.status.RESOURCE_EXHAUSTED : grpc.status.INVALID_ARGUMENT;
        return expectCode(await rawUnary(c, heal ? METHODS.heal : METHODS.health, body, t.allowed), want, `pv_name ${show(name)}`);
      });
      await fuzz(`oversized messages, ${t.name}`, { count: 12, ms: 20_000, concurrency: 4 }, async (r) => {
        const body = r.chance(0.5)
          ? encodeHealth(r.ascii(r.range(MAX_MESSAGE + 1, MAX_MESSAGE + 400_000), "abcdefghijklmnopqrstuvwxyz"))
          : r.bytes(r.range(MAX_MESSAGE + 1, MAX_MESSAGE + 300_000));
        return expectCode(
          await rawUnary(c, r.pick([METHODS.health, METHODS.heal]), body, t.allowed),
          grpc.status.RESOURCE_EXHAUSTED,
          `${body.length}-byte message`,
        );
      });
      await assertAlive(t);
    }
  });

  test("random bytes as the protobuf message → INTERNAL when they do not decode, else the code the decoded name deserves", async (ctx) => {
    const runs: [Target, string, boolean, string[]][] = [
      [off, "auth off", false, ["INTERNAL", "INVALID_ARGUMENT", "NOT_FOUND"]],
      [on, "auth on, allowed caller", true, ["INTERNAL", "INVALID_ARGUMENT", "NOT_FOUND"]],
      [on, "auth on, no token", false, ["INTERNAL", "UNAUTHENTICATED"]],
    ];
    for (const [t, label, withToken, classes] of runs) {
      const c = client(t);
      const seen = new Map<string, number>();
      await fuzz(`random message bodies, ${label}`, { count: 400, ms: 40_000, concurrency: 16 }, async (r) => {
        const path = r.pick([METHODS.health, METHODS.heal]);
        const body = randomBody(r);
        const want = expectedForBody(path, body, withToken, t === on);
        seen.set(grpc.status[want], (seen.get(grpc.status[want]) ?? 0) + 1);
        if (want === grpc.status.OK) return undefined; // names the real PV: not hostile, not sent
        return expectCode(await rawUnary(c, path, body, withToken ? t.allowed : {}), want, `${path} body ${body.toString("hex").slice(0, 60)}`);
      });
      ctx.diagnostic(`${label}: ${[...seen].map(([k, v]) => `${k} ${v}`).join(", ")}`);
      for (const cls of classes) assert.ok(seen.get(cls), `${label}: the bodies exercised ${cls}`);
    }
    await assertAlive(off);
    await assertAlive(on);
  });

  test("missing, malformed, garbage, expired, wrong-audience, not-allowed and huge tokens", async () => {
    const c = client(on);
    const r0 = (r: Rng, n: number) => TOKEN_MARKER + r.ascii(n);
    const reviews = () => kube.counters.get("create", "tokenreviews");
    const reviewsBefore = reviews();
    const started = Date.now();
    let refusedUnreviewed = 0;
    await fuzz("tokens", { count: 800, ms: 60_000, concurrency: 16 }, async (r) => {
      let md: Record<string, string>;
      let want = grpc.status.UNAUTHENTICATED;
      // A well-formed bearer token: reviewed (or refused by the budget), not refused by its form.
      let reviewed = false;
      const kind = r.int(9);
      switch (kind) {
        case 0:
          md = {};
          break;
        case 1:
          md = { authorization: `${r.pick(["Basic", "Token", "Bearer:", "Negotiate", ""])} ${r0(r, r.range(1, 200))}` };
          break;
        case 2:
          md = { authorization: `Bearer ${r0(r, r.range(1, 100))} ${r0(r, r.range(1, 100))}` };
          break;
        case 3:
          md = { authorization: `${r.pick(["Bearer", "bearer", "BEARER"])} ${r0(r, r.range(1, 4_000))}` };
          reviewed = true;
          break;
        case 4:
          md = { authorization: `Bearer ${r0(r, r.range(4_000, 15_000))}` };
          reviewed = true;
          break;
        case 5:
          md = { authorization: `Bearer ${r.pick([EXPIRED_TOKEN, OTHER_AUDIENCE_TOKEN])}` };
          reviewed = true;
          break;
        case 6:
          md = { authorization: `Bearer ${NOT_ALLOWED_TOKEN}` };
          want = grpc.status.PERMISSION_DENIED;
          reviewed = true;
          break;
        case 7:
          md = { authorization: `Bearer ${r0(r, r.range(MAX_METADATA + 100, 64_000))}` };
          want = grpc.status.RESOURCE_EXHAUSTED;
          break;
        default:
          md = { authorization: `Bearer ${VALID_TOKEN}`, ["x-" + r.ascii(8, "abcdefghij")]: r0(r, r.range(MAX_METADATA + 100, 64_000)) };
          want = grpc.status.RESOURCE_EXHAUSTED;
      }
      const heal = r.chance(0.5);
      const body = heal ? encodeHeal(REAL_PV, 1 + r.int(2)) : encodeHealth(REAL_PV);
      const got = await rawUnary(c, heal ? METHODS.heal : METHODS.health, body, md);
      if (got.code === grpc.status.RESOURCE_EXHAUSTED && BUDGET_SPENT.test(got.details)) refusedUnreviewed++;
      return reviewed ? expectReviewed(got, want, `token class ${kind}`) : expectCode(got, want, `token class ${kind}`);
    });
    // Hundreds of tokens never seen valid cost a bounded number of TokenReviews: the budget's burst
    // and its rate over the time taken (review-budget.ts), whatever the rate they came at.
    const spent = reviews() - reviewsBefore;
    const most = FAILED_BURST + Math.ceil(((Date.now() - started) / 1000) * FAILED_PER_SECOND) + 1;
    assert.ok(spent <= most, `${spent} TokenReviews for the token classes, at most ${most} allowed`);
    assert.ok(refusedUnreviewed > 0, "the flood was refused without a review once the budget was spent");
    await fuzz("identity pass-through without a valid token", { count: 150, ms: 20_000, concurrency: 16 }, async (r) => {
      const md: Record<string, string> = r.chance(0.3) ? {} : { authorization: `Bearer ${r0(r, r.range(1, 500))}` };
      const path = `/identity.Identity/${r.pick(["GetIdentity", "GetCapabilities", "Probe"])}`;
      return expectReviewed(await rawUnary(c, path, r.bytes(r.range(0, 200)), md), grpc.status.UNAUTHENTICATED, path);
    });
    await assertAlive(on);
  });

  test("huge metadata → RESOURCE_EXHAUSTED over 16 KiB or too many entries; INTERNAL past HTTP/2's header limit", async () => {
    for (const t of [off, on]) {
      await fuzz(`huge metadata, ${t.name}`, { count: 150, ms: 40_000, concurrency: 8 }, async (r) => {
        const md: Record<string, string | Buffer> = { ...t.allowed };
        let want = grpc.status.RESOURCE_EXHAUSTED;
        const kind = r.int(5);
        // One header value is limited by nghttp2's HPACK decoder at 64 KiB (encoded): below it our
        // 16 KiB limit answers, above it the stream is reset (COMPRESSION_ERROR → INTERNAL).
        if (kind === 0) md["x-junk"] = r.ascii(r.range(MAX_METADATA + 100, 64_000));
        else if (kind === 1) {
          const n = r.range(30, 60);
          const size = Math.ceil((MAX_METADATA + 1_000) / n) + r.int(500);
          for (let k = 0; k < n; k++) md[`x-junk-${k}`] = r.ascii(size);
        } else if (kind === 2) {
          // Past node:http2's 128 header pairs the stream is reset: ENHANCE_YOUR_CALM (grpc-js:
          // RESOURCE_EXHAUSTED), or over TLS now and then INTERNAL_ERROR (grpc-js: INTERNAL).
          for (let k = r.range(130, 400); k > 0; k--) md[`x-${k}`] = r.ascii(r.range(1, 10));
          const c = client(t, true);
          const got = await rawUnary(c, METHODS.health, encodeHealth(REAL_PV), md);
          c.close();
          const reset =
            (got.code === grpc.status.RESOURCE_EXHAUSTED && /Bandwidth exhausted/.test(got.details)) ||
            (got.code === grpc.status.INTERNAL && /RST_STREAM with code 2\b/.test(got.details));
          return reset ? undefined : `${Object.keys(md).length} entries: got ${grpc.status[got.code]} (${got.details}), want the stream reset`;
        } else if (kind === 3) {
          md["x-junk"] = r.ascii(r.range(130_000, 1_000_000));
          want = grpc.status.INTERNAL;
        } else md["x-junk-bin"] = r.bytes(r.range(MAX_METADATA + 100, 45_000)); // base64 on the wire, under 64 KiB
        // Each on its own connection: some of these end the connection they travel on.
        const c = client(t, true);
        const got = await rawUnary(c, METHODS.health, encodeHealth(REAL_PV), md);
        c.close();
        return expectCode(got, want, `metadata class ${kind}`);
      });
      await assertAlive(t);
    }
  });

  test("unknown methods → UNIMPLEMENTED", async () => {
    for (const t of [off, on]) {
      const c = client(t);
      await fuzz(`unknown methods, ${t.name}`, { count: 150, ms: 20_000, concurrency: 16 }, async (r) => {
        const path =
          r.pick(["/", "/sidecar.v1.VolumeHealer/", "/healer.v1.VolumeHealerNode/", "/csi.v1.Node/", "/../"]) +
          r.ascii(r.range(1, 200), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789./_-%");
        return expectCode(await rawUnary(c, path, r.bytes(r.range(0, 100)), t.allowed), grpc.status.UNIMPLEMENTED, path);
      });
      await assertAlive(t);
    }
  });

  test("afterwards: both sidecars alive and relaying, nothing reached the driver, logs are JSON lines without a token", async () => {
    // Runs alone too (by name): the hostile tests count their own inputs; this checks what they left.
    for (const t of [off, on]) await assertAlive(t);
    assert.equal(allDriverCalls(), driverCallsBefore, "no hostile request reached the driver (call log unchanged)");
    assert.deepEqual(stub.csiCalls(), [], "zero calls on the CSI socket");
    const controlCalls = healerDriverCalls();
    for (const t of [off, on]) {
      const r = await rawUnary(client(t), METHODS.health, encodeHealth(REAL_PV), t.allowed);
      assert.equal(r.code, grpc.status.OK, `${t.name} still relays an allowed call: ${r.details}`);
    }
    await waitFor("the two control calls in the call log", () => healerDriverCalls() === controlCalls + 2);
    for (const t of [off, on]) {
      const lines = t.sidecar.logLines(); // throws on a line that is not JSON
      // Hostile input is expected traffic: no error line (an error would be an unexpected code path).
      const errors = lines.filter((l) => l.level === "error");
      assert.deepEqual(errors.slice(0, 3), [], `${t.name}: ${errors.length} error lines in the log`);
      const out = t.sidecar.proc.stdout() + t.sidecar.proc.stderr();
      for (const secret of [TOKEN_MARKER, VALID_TOKEN, EXPIRED_TOKEN, OTHER_AUDIENCE_TOKEN, NOT_ALLOWED_TOKEN]) {
        assert.ok(!out.includes(secret), `${t.name}: no token (${secret.slice(0, 8)}…) in the log`);
      }
    }
  });
});
