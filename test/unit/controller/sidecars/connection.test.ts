// The controller's three questions to a sidecar over one channel (DESIGN 7.3): is it SERVING, what
// can its driver do, heal this volume; each with a deadline, the heal and the capability calls with
// the bearer token. Against a sidecar's gRPC services served in this process on a real port, so
// what crosses the wire (metadata, deadlines, enums) is what a real sidecar sees.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import { CallError } from "../../../../common/grpc/call-error.js";
import { SidecarConnection } from "../../../../controller/sidecars/connection.js";
import { SidecarChannel } from "../../../../controller/sidecars/channel.js";
import { channelSetup } from "../../../../controller/sidecars/credentials.js";
import { bindServer } from "../../../../sidecar/server/grpc-server.js";
import type { SidecarTls } from "../../../../controller/config/config.js";
import { makeTlsFiles } from "../../../support/secure-sidecar.js";
import { tempDir } from "../../../support/proc.js";
import { waitFor } from "../../../support/wait.js";
import { HealthCheckResponse, HealthService, HealthCheckResponse_ServingStatus as Serving } from "../../../../proto/gen/grpc/health/v1/health.js";
import { IdentityService, Capability_VolumeHealer_Type as HealerType } from "../../../../proto/gen/identity/identity.js";
import { HealVolumeRequest_Mode, HealVolumeResponse, VolumeHealerService, type HealVolumeRequest } from "../../../../proto/gen/sidecar/v1/healer.js";
import {
  HealReason,
  NodeHealVolumeResponse_Result as Result,
  TargetResult_State as PodState,
  VolumeHealth_State as State,
} from "../../../../proto/gen/healer/v1/healer.js";
import { reasonFor } from "../../../support/heal-request.js";

interface Seen {
  method: string;
  authorization: string | undefined;
  /** The call's deadline as the server received it, in ms from now. */
  deadlineInMs: number;
  request: unknown;
}

interface FakeSidecar {
  seen: Seen[];
  serving: Serving;
  healerTypes: HealerType[];
  heal: (req: HealVolumeRequest) => HealVolumeResponse | grpc.ServiceError | Promise<HealVolumeResponse | grpc.ServiceError>;
  /** PVs of the HealVolume calls the client cancelled. */
  cancelled?: string[];
  /** Set by serve(): stops the server at once, ending its connections. */
  stop?: () => void;
}

async function serve(t: TestContext, fake: FakeSidecar, credentials = grpc.ServerCredentials.createInsecure(), at = "127.0.0.1:0"): Promise<string> {
  const server = new grpc.Server();
  const record = (method: string, call: grpc.ServerUnaryCall<unknown, unknown>) => {
    const deadline = call.getDeadline();
    fake.seen.push({
      method,
      authorization: call.metadata.get("authorization")[0]?.toString(),
      deadlineInMs: deadline instanceof Date ? deadline.getTime() - Date.now() : Number(deadline) - Date.now(),
      request: call.request,
    });
  };
  server.addService(HealthService, {
    check: (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => (record("Check", call), cb(null, { status: fake.serving })),
    list: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb({ code: grpc.status.UNIMPLEMENTED }),
    watch: (call: grpc.ServerWritableStream<unknown, unknown>) => call.end(),
  });
  server.addService(IdentityService, {
    getCapabilities: (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      record("GetCapabilities", call);
      cb(null, {
        capabilities: [
          { type: { $case: "service", service: { type: 1 } } },
          ...fake.healerTypes.map((type) => ({ type: { $case: "volumeHealer", volumeHealer: { type } } })),
        ],
      });
    },
    getIdentity: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb({ code: grpc.status.UNIMPLEMENTED }),
    probe: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb({ code: grpc.status.UNIMPLEMENTED }),
  });
  server.addService(VolumeHealerService, {
    healVolume: (call: grpc.ServerUnaryCall<HealVolumeRequest, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      record("HealVolume", call);
      call.on("cancelled", () => fake.cancelled?.push(call.request.pvName));
      void Promise.resolve(fake.heal(call.request)).then((answer) => ("code" in answer ? cb(answer) : cb(null, answer)));
    },
    getVolumeHealth: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb({ code: grpc.status.UNIMPLEMENTED }),
  });
  const port = await bindServer(server, at, credentials);
  t.after(() => server.forceShutdown());
  fake.stop = () => server.forceShutdown();
  return `127.0.0.1:${port}`;
}

const plaintext = {};
const healed = (): HealVolumeResponse => ({
  result: Result.HEALED,
  health: { state: State.HEALTHY, reason: "", message: "" },
  message: "re-staged",
  volumeId: "vol-1",
  pods: [],
});

function connect(t: TestContext, address: string, token: () => string | undefined = () => "tok-1"): SidecarConnection {
  const conn = new SidecarConnection(address, plaintext, token);
  t.after(() => conn.close());
  return conn;
}

test("SERVING, capabilities and a heal: the token on the calls that need it, never on the health check; each call with its deadline", async (t) => {
  const fake: FakeSidecar = { seen: [], serving: Serving.SERVING, healerTypes: [HealerType.HEAL_VOLUME, HealerType.GET_VOLUME_HEALTH], heal: healed };
  let token = "tok-1";
  const conn = connect(t, await serve(t, fake), () => token);
  assert.deepEqual(await conn.health(10_000), { state: "serving" });
  assert.deepEqual(await conn.capabilities(20_000), { healVolume: true, getVolumeHealth: true });
  token = "tok-2"; // rotated: the next call carries the new one
  assert.deepEqual(await conn.heal("pv-1", "ALWAYS", "DRIVER_RESTARTED", 60_000), { result: "HEALED", health: "HEALTHY", message: "re-staged", pods: [] });
  await conn.heal("pv-2", "IF_ABNORMAL", "VOLUME_ABNORMAL", 60_000);
  assert.deepEqual(
    fake.seen.map((s) => [s.method, s.authorization, s.request]),
    [
      ["Check", undefined, { service: "sidecar.v1.VolumeHealer" }],
      ["GetCapabilities", "Bearer tok-1", {}],
      ["HealVolume", "Bearer tok-2", { pvName: "pv-1", mode: HealVolumeRequest_Mode.ALWAYS, reason: HealReason.DRIVER_RESTARTED }],
      ["HealVolume", "Bearer tok-2", { pvName: "pv-2", mode: HealVolumeRequest_Mode.IF_ABNORMAL, reason: HealReason.VOLUME_ABNORMAL }],
    ],
  );
  const [check, caps, heal] = fake.seen.map((s) => s.deadlineInMs);
  // Each its own: 10 s, 20 s and 60 s (what is left of each when the sidecar receives it).
  assert.ok(check! > 5_000 && check! <= 10_000, `health check deadline ${check} ms`);
  assert.ok(caps! > 15_000 && caps! <= 20_000, `capabilities deadline ${caps} ms`);
  assert.ok(heal! > 55_000 && heal! <= 60_000, `heal deadline ${heal} ms`);
});

test("capabilities: only the VolumeHealer ones count", async (t) => {
  const fake: FakeSidecar = { seen: [], serving: Serving.SERVING, healerTypes: [HealerType.GET_VOLUME_HEALTH], heal: healed };
  const conn = connect(t, await serve(t, fake));
  assert.deepEqual(await conn.capabilities(3_000), { healVolume: false, getVolumeHealth: true });
  fake.healerTypes = [];
  assert.deepEqual(await conn.capabilities(3_000), { healVolume: false, getVolumeHealth: false });
});

test("not SERVING, or nobody there: health() says which, with the status or the reason, instead of throwing", async (t) => {
  const fake: FakeSidecar = { seen: [], serving: Serving.NOT_SERVING, healerTypes: [], heal: healed };
  assert.deepEqual(await connect(t, await serve(t, fake)).health(2_000), { state: "not_serving", reason: "NOT_SERVING" });
  const nobody = await connect(t, "127.0.0.1:1").health(500);
  assert.ok(nobody.state === "unreachable", nobody.state);
  assert.match(nobody.reason, /^UNAVAILABLE: .*ECONNREFUSED/);
  // A gRPC server without the health service answers, with an error status: not SERVING, not unreachable.
  const bare = new grpc.Server();
  const port = await bindServer(bare, "127.0.0.1:0", grpc.ServerCredentials.createInsecure());
  t.after(() => bare.forceShutdown());
  const other = await connect(t, `127.0.0.1:${port}`).health(2_000);
  assert.ok(other.state === "not_serving", other.state);
  assert.match(other.reason, /^UNIMPLEMENTED/);
});

test("answers: the driver's result, the health after it and each pod's state; an unknown value is named as such", async (t) => {
  const fake: FakeSidecar = { seen: [], serving: Serving.SERVING, healerTypes: [], heal: healed };
  const conn = connect(t, await serve(t, fake));
  fake.heal = () => ({
    result: Result.NOT_HEALABLE,
    health: { state: State.ABNORMAL, reason: "Gone", message: "" },
    message: "image deleted",
    volumeId: "v",
    pods: [],
  });
  assert.deepEqual(await conn.heal("pv-1", "IF_ABNORMAL", "VOLUME_ABNORMAL", 5_000), {
    result: "NOT_HEALABLE",
    health: "ABNORMAL",
    message: "image deleted",
    pods: [],
  });
  fake.heal = () => ({ result: 99 as Result, health: undefined, message: "", volumeId: "v", pods: [] });
  assert.deepEqual(await conn.heal("pv-1", "ALWAYS", "DRIVER_RESTARTED", 5_000), {
    result: "RESULT_UNSPECIFIED",
    health: "STATE_UNSPECIFIED",
    message: "",
    pods: [],
  });
  const pod = (name: string, state: number) => ({ namespace: "apps", name, uid: `uid-${name}`, state, reason: "R", message: `m-${name}` });
  fake.heal = () => ({
    ...healed(),
    pods: [
      pod("a", PodState.WHOLE_IN_PLACE),
      pod("b", PodState.RESTART_NEEDED),
      pod("c", PodState.NOT_MOUNTED),
      pod("d", PodState.STATE_UNSPECIFIED),
      pod("e", 42),
    ],
  });
  const { pods } = await conn.heal("pv-1", "ALWAYS", "DRIVER_RESTARTED", 5_000);
  assert.deepEqual(
    pods.map((p) => [p.name, p.uid, p.state, p.message]),
    [
      ["a", "uid-a", "WHOLE_IN_PLACE", "m-a"],
      ["b", "uid-b", "RESTART_NEEDED", "m-b"],
      ["c", "uid-c", "NOT_MOUNTED", "m-c"],
      ["d", "uid-d", "UNKNOWN", "m-d"],
      ["e", "uid-e", "UNKNOWN", "m-e"],
    ],
  );
});

test("a refused call is a CallError with the sidecar's code and details; a token that cannot be read is UNAUTHENTICATED and nothing is sent", async (t) => {
  const fake: FakeSidecar = { seen: [], serving: Serving.SERVING, healerTypes: [], heal: healed };
  fake.heal = () =>
    Object.assign(new Error("refused"), { code: grpc.status.FAILED_PRECONDITION, details: "volume not on this node", metadata: new grpc.Metadata() });
  const conn = connect(t, await serve(t, fake));
  await assert.rejects(
    conn.heal("pv-1", "ALWAYS", "DRIVER_RESTARTED", 5_000),
    (err: unknown) =>
      err instanceof CallError &&
      err.code === grpc.status.FAILED_PRECONDITION &&
      err.details === "volume not on this node" &&
      err.message === "FAILED_PRECONDITION: volume not on this node",
  );
  const sent = fake.seen.length;
  const broken = connect(t, conn.address, () => {
    throw new Error("cannot read --token-file /var/run/secrets/tokens/healer: ENOENT");
  });
  await assert.rejects(
    broken.heal("pv-1", "ALWAYS", "DRIVER_RESTARTED", 5_000),
    (err: unknown) => err instanceof CallError && err.code === grpc.status.UNAUTHENTICATED && /token-file/.test(err.details),
  );
  assert.equal(fake.seen.length, sent);
  assert.deepEqual(await broken.health(2_000), { state: "serving" }, "the health check needs no token");
});

test("a heal whose signal aborts is cancelled at once, not left to its deadline: CANCELLED here, cancelled at the sidecar; an aborted signal sends nothing", async (t) => {
  const fake: FakeSidecar = { seen: [], serving: Serving.SERVING, healerTypes: [], heal: () => new Promise(() => {}), cancelled: [] };
  const conn = connect(t, await serve(t, fake));
  const abort = new AbortController();
  const call = conn.heal("pv-1", "ALWAYS", "DRIVER_RESTARTED", 3_000, abort.signal);
  await waitFor("the call at the sidecar", () => fake.seen.length === 1);
  abort.abort();
  await assert.rejects(call, (err: unknown) => err instanceof CallError && err.code === grpc.status.CANCELLED);
  await waitFor("the sidecar to see it cancelled", () => fake.cancelled!.length === 1);
  assert.deepEqual(fake.cancelled, ["pv-1"]);
  await assert.rejects(
    conn.heal("pv-2", "ALWAYS", "DRIVER_RESTARTED", 3_000, abort.signal),
    (err: unknown) => err instanceof CallError && err.code === grpc.status.CANCELLED,
  );
  assert.equal(fake.seen.length, 1);
});

test("no token configured: calls go without authorization", async (t) => {
  const fake: FakeSidecar = { seen: [], serving: Serving.SERVING, healerTypes: [], heal: healed };
  await connect(t, await serve(t, fake), () => undefined).heal("pv-1", "ALWAYS", "DRIVER_RESTARTED", 5_000);
  assert.equal(fake.seen[0]!.authorization, undefined);
});

test("TLS (channelSetup): verified against --sidecar-ca-file under --sidecar-tls-server-name; another CA, another name or plaintext get nowhere; skipping verification is the explicit exception", async (t) => {
  const [mine, other] = [await makeTlsFiles(tempDir("ctl-ca-")), await makeTlsFiles(tempDir("ctl-ca-"))];
  const fake: FakeSidecar = { seen: [], serving: Serving.SERVING, healerTypes: [], heal: healed };
  const creds = grpc.ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(mine.certFile), private_key: readFileSync(mine.keyFile) }]);
  const address = await serve(t, fake, creds);
  const reaches = (tls: SidecarTls) => {
    const conn = new SidecarConnection(address, channelSetup(tls), () => "tok");
    t.after(() => conn.close());
    return conn.health(2_000).then((h) => h.state === "serving");
  };
  const verified = { enabled: true, caFile: mine.certFile, serverName: "localhost", insecureSkipVerify: false };
  assert.equal(await reaches(verified), true);
  assert.equal(await reaches({ ...verified, caFile: other.certFile }), false, "a certificate the CA did not sign");
  assert.equal(await reaches({ ...verified, serverName: "sidecar.example.com" }), false, "a certificate for another name");
  assert.equal(await reaches({ enabled: true, caFile: undefined, serverName: undefined, insecureSkipVerify: true }), true);
  assert.equal(await reaches({ enabled: false, caFile: undefined, serverName: undefined, insecureSkipVerify: false }), false, "plaintext to a TLS port");
});

test("one connection for every call; a sidecar restarted on its address is dialled again by the next call; one nobody answers fails within the call's deadline", async (t) => {
  const fake: FakeSidecar = { seen: [], serving: Serving.SERVING, healerTypes: [], heal: healed };
  const address = await serve(t, fake);
  const conn = connect(t, address);
  await Promise.all([conn.heal("pv-1", "ALWAYS", "DRIVER_RESTARTED", 5_000), conn.heal("pv-2", "ALWAYS", "DRIVER_RESTARTED", 5_000), conn.health(5_000)]);
  fake.stop!();
  await assert.rejects(
    conn.heal("pv-3", "ALWAYS", "DRIVER_RESTARTED", 2_000),
    (err: unknown) => err instanceof CallError && err.code === grpc.status.UNAVAILABLE,
  );
  await serve(t, fake, undefined, address);
  assert.deepEqual(await conn.heal("pv-4", "ALWAYS", "DRIVER_RESTARTED", 5_000), { result: "HEALED", health: "HEALTHY", message: "re-staged", pods: [] });
  assert.deepEqual(
    fake.seen.filter((s) => s.method === "HealVolume").map((s) => (s.request as HealVolumeRequest).pvName),
    ["pv-1", "pv-2", "pv-4"],
  );

  // A listener that never answers the TLS or HTTP/2 handshake: the call ends at its deadline, not the connect timeout.
  const { createServer } = await import("node:net");
  const silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  t.after(() => silent.close());
  const mute = connect(t, `127.0.0.1:${(silent.address() as { port: number }).port}`);
  const started = Date.now();
  await assert.rejects(
    mute.heal("pv-5", "ALWAYS", "DRIVER_RESTARTED", 300),
    (err: unknown) => err instanceof CallError && err.code === grpc.status.DEADLINE_EXCEEDED,
  );
  assert.ok(Date.now() - started < 5_000);
});

test("a health check left unanswered drops the connection: the next call goes out on a new one, and a call still on the old one finishes", async (t) => {
  const http2 = await import("node:http2");
  const sessions: unknown[] = [];
  let answerHealth = false;
  const held: (() => void)[] = [];
  const server = http2.createServer();
  server.on("session", (s) => sessions.push(s));
  server.on("stream", (stream, headers) => {
    stream.on("data", () => undefined);
    stream.on("end", () => {
      const answer = () => {
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        const body = Buffer.from(
          headers[":path"] === "/grpc.health.v1.Health/Check"
            ? HealthCheckResponse.encode({ status: Serving.SERVING }).finish()
            : HealVolumeResponse.encode(healed()).finish(),
        );
        const head = Buffer.alloc(5);
        head.writeUInt32BE(body.length, 1);
        stream.end(Buffer.concat([head, body]));
      };
      if (headers[":path"] === "/grpc.health.v1.Health/Check" && !answerHealth) return;
      if (headers[":path"] === "/sidecar.v1.VolumeHealer/HealVolume" && sessions.length === 1) return void held.push(answer);
      answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => (sessions.forEach((s) => (s as { destroy(): void }).destroy()), server.close()));
  const conn = connect(t, `127.0.0.1:${(server.address() as { port: number }).port}`);
  const slowHeal = conn.heal("pv-1", "ALWAYS", "DRIVER_RESTARTED", 10_000);
  await waitFor("the heal at the sidecar", () => held.length === 1);
  const silent = await conn.health(200);
  assert.equal(silent.state, "unreachable");
  // The deadline sent is what is left of the 200 ms when the check goes out, a moment after it was asked for.
  assert.match((silent as { reason: string }).reason, /^DEADLINE_EXCEEDED: deadline of (19\d|200) ms exceeded$/);
  answerHealth = true;
  assert.deepEqual(await conn.health(2_000), { state: "serving" });
  assert.equal(sessions.length, 2, "the check after the silent one went out on a new connection");
  held[0]!();
  assert.equal((await slowHeal).result, "HEALED", "the heal on the old connection finished");
});

test("a connection without calls is closed after its idle time, not while a call waits; the next call opens another", async (t) => {
  let release: (() => void) | undefined;
  const fake: FakeSidecar = {
    seen: [],
    serving: Serving.SERVING,
    healerTypes: [HealerType.HEAL_VOLUME],
    heal: (req) => (req.pvName === "slow" ? new Promise((r) => (release = () => r(healed()))) : healed()),
  };
  const channel = new SidecarChannel(await serve(t, fake), plaintext, 100);
  t.after(() => channel.close());
  const heal = (pvName: string) =>
    channel.unary(
      VolumeHealerService.healVolume,
      { pvName, mode: HealVolumeRequest_Mode.ALWAYS, reason: reasonFor(HealVolumeRequest_Mode.ALWAYS) },
      { deadline: Date.now() + 10_000 },
    );
  const slow = heal("slow");
  await waitFor("the slow heal at the sidecar", () => release);
  await new Promise((r) => setTimeout(r, 300)); // three idle times: a call in flight keeps it open
  assert.equal(channel.isOpen, true);
  release!();
  await slow;
  await waitFor("the idle connection closed", () => !channel.isOpen);
  assert.equal((await heal("pv-2")).result, Result.HEALED);
  assert.equal(channel.isOpen, true, "opened again for the next call");
});
