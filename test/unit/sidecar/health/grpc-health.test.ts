// grpc.health.v1 as the sidecar serves it from Readiness, over a real socket: Check, Watch and List
// for the three names it knows, NOT_FOUND / SERVICE_UNKNOWN for others, and the `readiness`
// metadata that tells an operator which condition fails (printable ASCII only); and Readiness
// itself: since when a condition holds, and the log line at each change.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { HealthClient, HealthCheckResponse_ServingStatus as Status, type HealthCheckResponse } from "../../../../proto/gen/grpc/health/v1/health.js";
import { addHealthService } from "../../../../sidecar/health/grpc-health.js";
import { Readiness } from "../../../../sidecar/health/readiness.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { waitFor } from "../../../support/wait.js";

async function serve(t: import("node:test").TestContext): Promise<{ readiness: Readiness; client: HealthClient }> {
  const readiness = new Readiness(captureLogger().logger);
  const server = new grpc.Server();
  addHealthService(server, readiness);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const client = new HealthClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  t.after(() => {
    client.close();
    server.forceShutdown();
  });
  return { readiness, client };
}

const deadline = () => ({ deadline: Date.now() + 5_000 });

function check(client: HealthClient, service: string): Promise<{ status?: Status; code: grpc.status; details: string; readiness: string }> {
  return new Promise((resolve) => {
    let res: HealthCheckResponse | undefined;
    const call = client.check({ service }, new grpc.Metadata(), deadline(), (_err, r) => (res = r));
    call.on("status", (st) => resolve({ status: res?.status, code: st.code, details: st.details, readiness: String(st.metadata.get("readiness")[0] ?? "") }));
  });
}

const ready = (r: Readiness) => {
  r.set("driver", true, "driver ready");
  r.set("node", true, "CSIAddonsNode confirmed");
};

test("Check: the three names it serves follow readiness, with the failing condition in the `readiness` trailer; any other name is NOT_FOUND", async (t) => {
  const { readiness, client } = await serve(t);
  for (const service of ["", "sidecar.v1.VolumeHealer", "identity.Identity"]) {
    const r = await check(client, service);
    assert.equal(r.code, grpc.status.OK, `${service}: ${r.details}`);
    assert.equal(r.status, Status.NOT_SERVING, service);
    assert.match(r.readiness, /^not ready: driver not connected yet \(since .+\); CSIAddonsNode not confirmed by the API yet/);
  }
  const unknown = await check(client, "no.such.Service");
  assert.deepEqual([unknown.code, unknown.details], [grpc.status.NOT_FOUND, "health status unknown for service no.such.Service"]);
  ready(readiness);
  const r = await check(client, "");
  assert.equal(r.status, Status.SERVING);
  assert.match(r.readiness, /^ready: driver ready \(since .+\); CSIAddonsNode confirmed/);
  // Metadata values must be printable ASCII: anything else is replaced, not a broken answer.
  readiness.set("driver", false, "driver gone \u2014 restarting");
  const odd = await check(client, "");
  assert.equal(odd.code, grpc.status.OK, odd.details);
  assert.match(odd.readiness, /driver gone \? restarting/);
});

test("Watch: the current status at once, then every change, until the watcher leaves; another name is SERVICE_UNKNOWN", async (t) => {
  const { readiness, client } = await serve(t);
  const seen: Status[] = [];
  let reason = "";
  const watch = client.watch({ service: "sidecar.v1.VolumeHealer" });
  watch.on("metadata", (md) => (reason = String(md.get("readiness")[0] ?? "")));
  watch.on("data", (r: HealthCheckResponse) => seen.push(r.status));
  watch.on("error", () => {});
  await waitFor("the current status", () => seen.length === 1);
  assert.deepEqual(seen, [Status.NOT_SERVING]);
  assert.match(reason, /^not ready: driver not connected yet/);
  ready(readiness);
  await waitFor("SERVING streamed", () => seen.length === 2);
  readiness.set("shutdown", false, "shutting down");
  await waitFor("NOT_SERVING streamed", () => seen.length === 3);
  assert.deepEqual(seen, [Status.NOT_SERVING, Status.SERVING, Status.NOT_SERVING]);
  assert.equal(readiness.listenerCount("change"), 1);
  watch.cancel();
  await waitFor("the watcher's listener removed", () => readiness.listenerCount("change") === 0);

  const other: Status[] = [];
  const unknown = client.watch({ service: "no.such.Service" });
  unknown.on("data", (r: HealthCheckResponse) => other.push(r.status));
  unknown.on("error", () => {});
  await waitFor("an answer for an unknown name", () => other.length === 1);
  assert.deepEqual(other, [Status.SERVICE_UNKNOWN]);
  assert.equal(readiness.listenerCount("change"), 0, "nothing to follow for an unknown name");
  unknown.cancel();
});

test("List: every name it serves, each with the current status", async (t) => {
  const { readiness, client } = await serve(t);
  const list = () =>
    new Promise<Record<string, Status>>((resolve, reject) =>
      client.list({}, new grpc.Metadata(), deadline(), (err, r) =>
        err ? reject(err) : resolve(Object.fromEntries(Object.entries(r!.statuses).map(([k, v]) => [k, v.status]))),
      ),
    );
  const all = (s: Status) => ({ "": s, "sidecar.v1.VolumeHealer": s, "identity.Identity": s });
  assert.deepEqual(await list(), all(Status.NOT_SERVING));
  ready(readiness);
  assert.deepEqual(await list(), all(Status.SERVING));
});

test("many watchers at once (one listener each) are no leak warning", async (t) => {
  const { readiness, client } = await serve(t);
  const warnings: Error[] = [];
  const onWarning = (w: Error) => w.name === "MaxListenersExceededWarning" && warnings.push(w);
  process.on("warning", onWarning);
  t.after(() => process.off("warning", onWarning));
  const statuses: Status[][] = Array.from({ length: 20 }, () => []);
  const watches = statuses.map((seen) => {
    const w = client.watch({ service: "" });
    w.on("data", (r: HealthCheckResponse) => seen.push(r.status));
    w.on("error", () => {});
    return w;
  });
  await waitFor("every watcher told the current status", () => statuses.every((s) => s.length === 1));
  ready(readiness);
  await waitFor("every watcher told SERVING", () => statuses.every((s) => s.length === 2));
  assert.equal(readiness.listenerCount("change"), 20);
  assert.deepEqual(
    warnings.map((w) => w.message),
    [],
  );
  for (const w of watches) w.cancel();
});

test("Readiness: a condition's `since` moves only when it flips; each change of SERVING is logged once, with why", async () => {
  const { lines, logger } = captureLogger("info");
  const r = new Readiness(logger);
  const since = () => /driver not connected yet \(since (\S+)\)/.exec(r.reason())?.[1];
  const created = since();
  assert.ok(created);
  await waitFor("the clock past the creation's millisecond", () => new Date().toISOString() !== created);
  r.set("driver", false, "driver not connected yet");
  assert.equal(since(), created, "still failing: since unchanged");
  ready(r);
  assert.match(r.reason(), /^ready: driver ready \(since (\S+)\)/);
  assert.notEqual(/driver ready \(since (\S+)\)/.exec(r.reason())![1], created, "flipped: since moved");
  r.set("shutdown", false, "shutting down");
  r.set("shutdown", false, "shutting down");
  assert.deepEqual(
    lines.map((l) => [l["message"], String(l["why"]).split(":")[0]]),
    [
      ["ready: SERVING", "ready"],
      ["not ready: NOT_SERVING", "not ready"],
    ],
  );
});
