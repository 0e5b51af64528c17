// The driver's socket watch (sidecar/driver/socket-watch.ts) in process: it tells of its own
// socket's name only, watches a directory made after it started, watches again after an error,
// waits a second between attempts by default (a wait that keeps no program alive), and after
// close() watches nothing more. The first two on the real node:fs watch, the rest on a fake that
// the test drives.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { watch, writeFileSync, mkdirSync, type FSWatcher } from "node:fs";
import { join } from "node:path";
import { SocketWatch, type SocketWatchOptions } from "../../../../sidecar/driver/socket-watch.js";
import { tempDir } from "../../../support/proc.js";
import { waitFor } from "../../../support/wait.js";
import { activeHandles } from "../../../support/handles.js";

test("only its own socket's name is told: other files in the directory are not", async (t) => {
  const dir = tempDir();
  let told = 0;
  const w = new SocketWatch(join(dir, "csi-addons.sock"), () => void told++);
  t.after(() => w.close());
  w.start();
  // A second watch of the directory as a witness: once it has seen a file, so has ours.
  const seen = new Set<string>();
  const witness = watch(dir, (_e, name) => name && seen.add(name));
  t.after(() => witness.close());
  for (const other of ["registration.sock", "other.sock"]) {
    writeFileSync(join(dir, other), "");
    await waitFor(`the witness to see ${other}`, () => seen.has(other));
  }
  assert.equal(told, 0, "another file is no change of the driver's socket");
  writeFileSync(join(dir, "csi-addons.sock"), "");
  await waitFor("told of the socket", () => told > 0);
});

test("a directory that does not exist yet is watched once it does", async (t) => {
  const dir = join(tempDir(), "plugins", "driver");
  let told = 0;
  const w = new SocketWatch(join(dir, "csi-addons.sock"), () => void told++, { retryMs: 20 });
  t.after(() => w.close());
  w.start();
  mkdirSync(dir, { recursive: true });
  // Made until told: the watch may come after the first file.
  await waitFor(
    "told of the socket in the new directory",
    () => {
      writeFileSync(join(dir, "csi-addons.sock"), "");
      return told > 0;
    },
    { intervalMs: 50 },
  );
});

/** A watch the test drives: every call recorded with its time; `fail` makes the next calls throw. */
function fakeWatch() {
  const calls: { at: number; watcher: EventEmitter & { closed: boolean } }[] = [];
  let fail = false;
  const fn: NonNullable<SocketWatchOptions["watch"]> = () => {
    const watcher = Object.assign(new EventEmitter(), { closed: false, close: () => void (watcher.closed = true) });
    calls.push({ at: Date.now(), watcher });
    if (fail) throw Object.assign(new Error("ENOENT: no such file or directory, watch"), { code: "ENOENT" });
    return watcher as unknown as FSWatcher;
  };
  return { fn, calls, failing: (v: boolean) => void (fail = v) };
}

test("a directory that cannot be watched is tried again a second later by default, not in a loop", async (t) => {
  const fake = fakeWatch();
  fake.failing(true);
  const w = new SocketWatch("/absent/csi-addons.sock", () => undefined, { watch: fake.fn });
  t.after(() => w.close());
  w.start();
  await waitFor("a second attempt", () => fake.calls.length >= 2, { timeoutMs: 5_000 });
  assert.ok(fake.calls[1]!.at - fake.calls[0]!.at >= 950, `tried again after ${fake.calls[1]!.at - fake.calls[0]!.at} ms`);
});

test("a watch that fails is closed and made again; after close(), nothing is watched again", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const fake = fakeWatch();
  const w = new SocketWatch("/run/csi/csi-addons.sock", () => undefined, { watch: fake.fn, retryMs: 10 });
  w.start();
  fake.calls[0]!.watcher.emit("error", new Error("EMFILE"));
  assert.equal(fake.calls[0]!.watcher.closed, true);
  t.mock.timers.tick(10);
  assert.equal(fake.calls.length, 2, "watched again after retryMs");

  w.close();
  assert.equal(fake.calls[1]!.watcher.closed, true);
  // An error the closed watcher still reports starts nothing, however long one waits.
  fake.calls[1]!.watcher.emit("error", new Error("late"));
  t.mock.timers.tick(60_000);
  assert.equal(fake.calls.length, 2);
});

test("the wait before watching again keeps no program alive", (t) => {
  const timers = () => activeHandles("Timeout");
  const fake = fakeWatch();
  fake.failing(true);
  const w = new SocketWatch("/absent/csi-addons.sock", () => undefined, { watch: fake.fn, retryMs: 60_000 });
  t.after(() => w.close());
  const before = timers();
  w.start();
  assert.equal(fake.calls.length, 1);
  assert.equal(timers(), before, "the retry's timer is unref'd");
});
