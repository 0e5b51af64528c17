// The controller's Event backlog: written one at a time in order, a repeat bumps the Event it
// repeats, heals go first (within a bound), a full backlog drops (counted, logged once) instead of
// blocking a heal, and shutdown waits for the backlog within a bound. The Kubernetes side is a fake of the narrow KubeWrites
// slice the recorder uses; the integration tests cover the real API server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { KubeRequestError, type EventRecord } from "../../../../controller/kube/api.js";
import { EventRecorder } from "../../../../controller/report/events.js";
import type { PvInfo } from "../../../../controller/plan/types.js";
import { captureLogger } from "../../../support/capture-logger.js";
import { waitFor } from "../../../support/wait.js";

function fakeKube() {
  const created: { namespace: string; e: EventRecord }[] = [];
  const bumped: { name: string; count: number }[] = [];
  let inFlight = 0;
  let peak = 0;
  let started = 0;
  const gates: (() => void)[] = [];
  let held = false;
  const pass = async () => {
    started++;
    inFlight++;
    peak = Math.max(peak, inFlight);
    if (held) await new Promise<void>((resolve) => gates.push(resolve));
    inFlight--;
  };
  return {
    created,
    bumped,
    peak: () => peak,
    /** Writes begun, counted when the call is made. */
    started: () => started,
    hold: () => void (held = true),
    release: () => {
      held = false;
      for (const open of gates.splice(0)) open();
    },
    kube: {
      async createEvent(namespace: string, e: EventRecord) {
        await pass();
        created.push({ namespace, e });
        return `ev-${created.length}`;
      },
      async bumpEvent(_namespace: string, name: string, count: number) {
        await pass();
        bumped.push({ name, count });
      },
    },
  };
}

/** The recorder's two metrics: drops counted, the backlog's depth as last set. */
const metrics = () => {
  let dropped = 0;
  let queued = 0;
  return { dropped: { inc: () => void dropped++ }, queued: { set: (n: number) => void (queued = n) }, droppedCount: () => dropped, depth: () => queued };
};
const pv = (i: number, claim = false): PvInfo => ({
  name: `pv-${i}`,
  uid: `uid-${i}`,
  driver: "stub.csi.example.com",
  handle: `vol-${i}`,
  deleting: false,
  claim: claim ? { namespace: "apps", name: `data-${i}`, uid: `claim-${i}` } : undefined,
});

test(
  "events are written one at a time, in order, one per outcome: on the claim naming the PV as related, on the PV when unbound; a repeat bumps the Event it repeats",
  { timeout: 10_000 },
  async () => {
    const f = fakeKube();
    const { logger } = captureLogger();
    const rec = new EventRecorder(f.kube, logger, metrics());
    for (let i = 0; i < 20; i++) rec.volume(pv(i, i % 2 === 0), "Normal", "VolumeHealed", "volume healed");
    rec.volume(pv(0, true), "Normal", "VolumeHealed", "volume healed");
    await rec.flush(600_000); // returns once drained, long before its bound
    assert.equal(f.peak(), 1, "never two writes at once");
    assert.deepEqual(
      f.created.slice(0, 3).map((c) => `${c.namespace}/${c.e.involved.kind}/${c.e.involved.name} ${c.e.related?.name ?? "-"}`),
      ["apps/PersistentVolumeClaim/data-0 pv-0", "default/PersistentVolume/pv-1 -", "apps/PersistentVolumeClaim/data-2 pv-2"],
    );
    assert.equal(f.created.length, 20, "one per volume: 10 claims, 10 unbound PVs");
    assert.deepEqual(f.bumped, [{ name: "ev-1", count: 2 }], "the repeat of pv-0's event bumped it");
  },
);

test("a full backlog drops new events (counted, one warning), never blocks the caller, and says when it accepts again", async () => {
  const f = fakeKube();
  const { lines, logger } = captureLogger();
  const m = metrics();
  const rec = new EventRecorder(f.kube, logger, m, { maxQueued: 3 });
  f.hold();
  rec.volume(pv(0), "Warning", "VolumeHealFailed", "failed");
  assert.equal(m.depth(), 1, "the one being written");
  for (let i = 1; i < 10; i++) rec.volume(pv(i), "Warning", "VolumeHealFailed", "failed");
  // One is being written, 3 wait: the other 6 are dropped at once.
  assert.equal(m.droppedCount(), 6);
  assert.equal(m.depth(), 4, "the backlog's depth: 3 waiting and 1 being written");
  assert.equal(lines.filter((l) => l["message"] === "event backlog full; dropping new events until it drains").length, 1, "one warning, not one per event");
  f.release();
  await rec.flush(5_000);
  assert.deepEqual(
    f.created.map((c) => c.e.involved.name),
    ["pv-0", "pv-1", "pv-2", "pv-3"],
  );
  assert.equal(m.depth(), 0, "drained");
  rec.volume(pv(99), "Normal", "VolumeHealed", "volume healed");
  await rec.flush(5_000);
  assert.equal(f.created.at(-1)?.e.involved.name, "pv-99");
  const said = () => lines.map((l) => [l["message"], l["dropped"] ?? l["queued"]]);
  const FULL = "event backlog full; dropping new events until it drains";
  const AGAIN = "event backlog accepting again";
  assert.deepEqual(
    said(),
    [
      [FULL, 3],
      [AGAIN, 6],
    ],
    "the drop is summed up once it drains",
  );
  rec.volume(pv(100), "Normal", "VolumeHealed", "volume healed");
  await rec.flush(5_000);
  assert.deepEqual(
    said(),
    [
      [FULL, 3],
      [AGAIN, 6],
    ],
    "said once",
  );

  // A single event dropped is warned about, and summed up, too.
  f.hold();
  for (let i = 0; i < 5; i++) rec.volume(pv(200 + i), "Warning", "VolumeHealFailed", "failed");
  assert.deepEqual(said(), [
    [FULL, 3],
    [AGAIN, 6],
    [FULL, 3],
  ]);
  f.release();
  await rec.flush(5_000);
  rec.volume(pv(300), "Normal", "VolumeHealed", "volume healed");
  assert.deepEqual(said(), [
    [FULL, 3],
    [AGAIN, 6],
    [FULL, 3],
    [AGAIN, 1],
  ]);
  await rec.flush(5_000);
  assert.equal(m.droppedCount(), 7);
});

test("flush waits for the backlog, but no longer than its bound", { timeout: 10_000 }, async () => {
  const f = fakeKube();
  const { lines, logger } = captureLogger();
  const rec = new EventRecorder(f.kube, logger, metrics());
  await rec.flush(1_000); // nothing queued: at once
  f.hold();
  rec.volume(pv(1), "Normal", "VolumeHealed", "volume healed");
  rec.volume(pv(2), "Normal", "VolumeHealed", "volume healed");
  await rec.flush(50);
  assert.equal(f.created.length, 0, "the write is still held");
  assert.ok(lines.some((l) => l["message"] === "events not written before shutdown" && l["events"] === 2));
  f.release();
  await waitFor("the held events written", () => f.created.length === 2);
});

/** Heals as the recorder sees them: busy until finish() (the work queue's shape). */
function heals() {
  let busy = true;
  let resolve!: () => void;
  const idle = new Promise<void>((r) => (resolve = r));
  return {
    get busy() {
      return busy;
    },
    idle: () => idle,
    finish: () => ((busy = false), resolve()),
  };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

test("while heals run, events wait (by default up to seconds), and go out as soon as the heals are done", async () => {
  const f = fakeKube();
  const h = heals();
  const rec = new EventRecorder(f.kube, captureLogger().logger, metrics(), { heals: h });
  rec.volume(pv(1), "Normal", "VolumeHealed", "volume healed");
  await turn();
  assert.equal(f.started(), 0, "no write while heals are busy");
  h.finish();
  await waitFor("the event written", () => f.created.length === 1);
});

test("an event waits for heals no longer than maxDelayMs after it was queued", { timeout: 10_000 }, async () => {
  const f = fakeKube();
  const rec = new EventRecorder(f.kube, captureLogger().logger, metrics(), { heals: heals(), maxDelayMs: 40 });
  const queued = Date.now();
  rec.volume(pv(1), "Normal", "VolumeHealed", "volume healed");
  rec.volume(pv(2), "Normal", "VolumeHealed", "volume healed");
  await waitFor("both written though heals never finish", () => f.created.length === 2);
  assert.ok(Date.now() - queued >= 40, "not before the bound");
});

test("a write the API server never answers is given up at its deadline (logged) and the backlog moves on", { timeout: 10_000 }, async () => {
  const created: string[] = [];
  const kube = {
    async createEvent(_namespace: string, e: EventRecord, signal: AbortSignal) {
      // pv-1's write hangs as a request to a stuck API server would, until its signal gives up;
      // the others take a little while, as requests do.
      const hang = e.involved.name === "pv-1";
      await new Promise<void>((resolve, reject) => {
        const slow = hang ? undefined : setTimeout(resolve, 20);
        signal.addEventListener("abort", () => (clearTimeout(slow), reject(signal.reason as Error)), { once: true });
      });
      created.push(e.involved.name);
      return `ev-${created.length}`;
    },
    async bumpEvent() {},
  };
  const { lines, logger } = captureLogger();
  const rec = new EventRecorder(kube, logger, metrics(), { writeTimeoutMs: 50 });
  rec.volume(pv(1), "Normal", "VolumeHealed", "volume healed");
  rec.volume(pv(2), "Normal", "VolumeHealed", "volume healed");
  await waitFor("pv-2's Event written", () => created.length === 1);
  assert.deepEqual(created, ["pv-2"]);
  assert.deepEqual(
    lines.filter((l) => l["level"] === "warn").map((l) => [l["message"], l["object"], l["reason"]]),
    [["could not record event", "PersistentVolume/pv-1", "VolumeHealed"]],
  );
  assert.match(String(lines[0]!["error"]), /timeout/i);

  // The default deadline leaves a slow API server its time.
  const patient = new EventRecorder(kube, logger, metrics());
  patient.volume(pv(3), "Normal", "VolumeHealed", "volume healed");
  await patient.flush(5_000);
  assert.deepEqual(created, ["pv-2", "pv-3"]);
});

test("a repeat whose Event is gone (expired by the API server: the bump fails) starts a new Event; the most recent Events are the ones remembered", async () => {
  const created: string[] = [];
  const bumped: string[] = [];
  const gone = new Set<string>();
  const kube = {
    async createEvent(_namespace: string, e: EventRecord) {
      created.push(e.involved.name);
      return `ev-${created.length}`;
    },
    async bumpEvent(_namespace: string, name: string) {
      if (gone.has(name)) throw new KubeRequestError(404, `patch Event default/${name}: HTTP 404: events "${name}" not found`);
      bumped.push(name);
    },
  };
  const { lines, logger } = captureLogger();
  const rec = new EventRecorder(kube, logger, metrics(), { remembered: 2 });
  const healed = (i: number) => rec.volume(pv(i), "Normal", "VolumeHealed", "volume healed");
  healed(1); // ev-1
  healed(2); // ev-2
  await rec.flush(5_000);
  gone.add("ev-1");
  healed(1); // its bump fails: ev-3, now the most recent
  healed(3); // ev-4: pv-2's ev-2, the oldest, is forgotten
  await rec.flush(5_000);
  healed(1); // bumps ev-3
  healed(2); // forgotten: ev-5
  await rec.flush(5_000);
  assert.deepEqual(created, ["pv-1", "pv-2", "pv-1", "pv-3", "pv-2"]);
  assert.deepEqual(bumped, ["ev-3"]);
  assert.deepEqual(
    lines.filter((l) => l["level"] === "warn"),
    [],
    "a gone Event is not a failure to report",
  );
});

test("a repeat whose bump is refused (403) or fails (500) is that write's failure, logged: no new Event for every repeat", async () => {
  const created: string[] = [];
  let answer = 403;
  const kube = {
    async createEvent(_namespace: string, e: EventRecord) {
      created.push(e.involved.name);
      return `ev-${created.length}`;
    },
    async bumpEvent(_namespace: string, name: string) {
      throw new KubeRequestError(answer, `patch Event default/${name}: HTTP ${answer}`);
    },
  };
  const { lines, logger } = captureLogger();
  const rec = new EventRecorder(kube, logger, metrics());
  const healed = () => rec.volume(pv(1), "Normal", "VolumeHealed", "volume healed");
  healed();
  await rec.flush(5_000);
  healed();
  await rec.flush(5_000);
  answer = 500;
  healed();
  await rec.flush(5_000);
  assert.deepEqual(created, ["pv-1"]);
  const failed = lines.filter((l) => l["message"] === "could not record event");
  assert.deepEqual(
    failed.map((l) => [l["level"], l["error"]]),
    [
      ["warn", "patch Event default/ev-1: HTTP 403"],
      ["warn", "patch Event default/ev-1: HTTP 500"],
    ],
  );
});

test("a backlog past 64 gets more writers, at most 4, and never two writes of one Event at once: each repeat bumps the one Event it repeats", async () => {
  const f = fakeKube();
  const { logger } = captureLogger();
  const rec = new EventRecorder(f.kube, logger, metrics());
  f.hold();
  for (let i = 0; i < 200; i++) rec.volume(pv(i % 100), "Normal", "VolumeHealed", "volume healed");
  await waitFor("four writers waiting on the API", () => f.started() === 4);
  f.release();
  await rec.flush(60_000);
  assert.equal(f.peak(), 4, "four writes at once, no more");
  assert.equal(f.created.length, 100, "one Event per volume");
  assert.equal(f.bumped.length, 100, "its repeat bumped it");
  assert.deepEqual(new Set(f.bumped.map((b) => b.count)), new Set([2]));
});
