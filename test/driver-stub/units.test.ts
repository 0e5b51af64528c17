// The driver-stub's pure parts: state file validation and defaults, secret redaction, the
// cancellable delay (a dead call must leave no timer behind), and the state store's merging of its
// own changes with an edit of the file.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { redactSecrets, secretDigest } from "../../driver-stub/call-log.js";
import { CallGoneError, delay } from "../../driver-stub/delay.js";
import { VolumeLocks } from "../../driver-stub/locks.js";
import { healVolume, parseState, resolveState, StateFormatError } from "../../driver-stub/state.js";
import { StateStore } from "../../driver-stub/state-store.js";
import { tempDir } from "../support/proc.js";

const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

describe("driver-stub delay", () => {
  it("clears its timer the moment the call is aborted", async () => {
    const aborter = new AbortController();
    const before = timers();
    const waiting = delay(60_000, aborter.signal);
    assert.equal(timers(), before + 1);
    aborter.abort();
    await assert.rejects(waiting, CallGoneError);
    assert.equal(timers(), before, "no timer left for the dead call");
  });

  it("resolves after the delay, and rejects at once for a call that is already gone", async () => {
    const aborter = new AbortController();
    const t0 = performance.now();
    await delay(50, aborter.signal);
    assert.ok(performance.now() - t0 >= 49);
    aborter.abort();
    await assert.rejects(delay(50, aborter.signal), CallGoneError);
  });
});

describe("driver-stub state file", () => {
  it("fills in the documented defaults", () => {
    const s = resolveState(parseState('{"volumes": {"v": {}}}'));
    assert.deepEqual(s.ready, true);
    assert.deepEqual(s.capabilities, {
      getVolumeHealth: true,
      healVolume: true,
      reclaimSpaceOffline: false,
      reclaimSpaceOnline: false,
      encryptionKeyRotation: false,
      networkFence: false,
      getClientsToFence: false,
      volumeReplication: false,
      replicationDestinationInfo: false,
      volumeGroup: false,
      controllerService: false,
    });
    assert.deepEqual(s.volumes.get("v"), { state: "HEALTHY", reason: "", message: "", heal: "SUCCEED", delayMs: 0, locked: false });
    assert.deepEqual(resolveState({}).volumes.size, 0);
  });

  it("rejects what it does not understand, naming where", () => {
    for (const [text, why] of [
      ["[]", /expected a JSON object/],
      ['{"Ready": true}', /state: unknown key "Ready"/],
      ['{"capabilities": {"heal": true}}', /state\.capabilities: unknown key "heal"/],
      ['{"volumes": {"v": {"heal": "MAYBE"}}}', /state\.volumes\["v"\]\.heal: expected SUCCEED\|FAIL\|NOT_HEALABLE/],
      ['{"volumes": {"v": {"delayMs": -1}}}', /delayMs: expected a number >= 0/],
      ['{"volumes": {"v": {"locked": "yes"}}}', /locked: expected a boolean/],
      ['{"volumes": {"v": 1}}', /state\.volumes\["v"\]: expected an object/],
    ] as const) {
      assert.throws(() => parseState(text), (err: Error) => err instanceof StateFormatError && why.test(err.message), text);
    }
  });

  it("a healed volume becomes HEALTHY with its fault cleared and everything else kept", () => {
    const before = parseState('{"ready": true, "volumes": {"v": {"state": "ABNORMAL", "reason": "R", "message": "M", "delayMs": 5}, "w": {"state": "ABNORMAL"}}}');
    assert.deepEqual(JSON.parse(JSON.stringify(healVolume(before, "v"))), {
      ready: true,
      volumes: { v: { state: "HEALTHY", delayMs: 5 }, w: { state: "ABNORMAL" } },
    });
  });
});

describe("driver-stub state store", () => {
  it("a heal and an edit of the file made before the heal is written both end up in memory and in the file", async () => {
    const file = join(tempDir("state-store-"), "state.json");
    const write = (volumes: object) => writeFileSync(file, JSON.stringify({ volumes }));
    write({ v: { state: "ABNORMAL", reason: "R" }, w: { state: "ABNORMAL" } });
    const store = new StateStore(file, (line) => assert.fail(line));
    try {
      store.markHealed("v");
      assert.equal(store.current().volumes.get("v")?.state, "HEALTHY", "in memory at once");
      // Before the store's write (the next turn of the event loop): someone adds a volume.
      write({ v: { state: "ABNORMAL", reason: "R" }, w: { state: "ABNORMAL" }, x: { state: "UNSUPPORTED" } });
      await store.written();
      const expected = { volumes: { v: { state: "HEALTHY" }, w: { state: "ABNORMAL" }, x: { state: "UNSUPPORTED" } } };
      assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), expected);
      assert.deepEqual(
        Object.fromEntries([...store.current().volumes].map(([id, v]) => [id, v.state])),
        { v: "HEALTHY", w: "ABNORMAL", x: "UNSUPPORTED" },
      );
    } finally {
      store.close();
    }
  });
});

describe("driver-stub secrets and locks", () => {
  it("replaces every secret value with a short digest of it and keeps the keys", () => {
    assert.equal(secretDigest("x"), "sha256:2d711642b726b044"); // sha256("x") = 2d711642b726b044…
    assert.deepEqual(redactSecrets({ volumeId: "v", secrets: { a: "x", b: "y" }, volumeContext: { secrets: "not a map" } }), {
      volumeId: "v",
      secrets: { a: "sha256:2d711642b726b044", b: secretDigest("y") },
      volumeContext: { secrets: "not a map" },
    });
  });

  it("a volume lock is exclusive until released, and per volume", () => {
    const locks = new VolumeLocks();
    const release = locks.tryAcquire("v");
    assert.ok(release);
    assert.equal(locks.tryAcquire("v"), undefined);
    assert.ok(locks.tryAcquire("w"));
    release();
    release(); // twice is harmless
    assert.ok(locks.tryAcquire("v"));
  });
});
