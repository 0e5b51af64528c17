// The driver-stub's pure parts: state file validation and defaults (and --help's account of them),
// secret redaction, the cancellable delay (a dead call must leave no timer or listener behind), the
// volume lock, and the state store: its own changes merged with edits of the file, written once.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it, type TestContext } from "node:test";
import { redactSecrets, secretDigest } from "../../../driver-stub/call-log.js";
import { CallGoneError, delay } from "../../../driver-stub/delay.js";
import { VolumeLocks } from "../../../driver-stub/locks.js";
import { USAGE } from "../../../driver-stub/cli.js";
import { healVolume, parseState, resolveState, resolveVolume, StateFormatError, type StubState } from "../../../driver-stub/state.js";
import { StateStore } from "../../../driver-stub/state-store.js";
import { tempDir } from "../../support/proc.js";
import { waitFor } from "../../support/wait.js";
import { activeHandles } from "../../support/handles.js";

const timers = () => activeHandles("Timeout");

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

  it("leaves no listener on the call's signal once it ends, by its time or by the call's end; waits even 1 ms", async () => {
    const call = new AbortController();
    const before = timers();
    const waiting = delay(1, call.signal);
    assert.equal(timers(), before + 1, "a 1 ms delay is a timer too");
    await waiting;
    assert.equal(getEventListeners(call.signal, "abort").length, 0);
    const gone = new AbortController();
    const cut = delay(60_000, gone.signal);
    gone.abort();
    await assert.rejects(cut, CallGoneError);
    assert.equal(getEventListeners(gone.signal, "abort").length, 0);
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
    assert.deepEqual(s.volumes.get("v"), {
      state: "HEALTHY",
      reason: "",
      message: "",
      heal: "SUCCEED",
      delayMs: 0,
      locked: false,
      dataPath: "reattach",
      published: undefined,
    });
    const fuse = resolveState(parseState('{"volumes": {"v": {"dataPath": "fuse", "published": ["/t"]}}}')).volumes.get("v")!;
    assert.deepEqual([fuse.dataPath, fuse.published], ["fuse", ["/t"]]);
    assert.deepEqual(resolveState({}).volumes.size, 0);
  });

  it("rejects what it does not understand, naming where", () => {
    for (const [text, why] of [
      ["[]", /expected a JSON object/],
      ['{"Ready": true}', /state: unknown key "Ready"/],
      ['{"capabilities": {"heal": true}}', /state\.capabilities: unknown key "heal"/],
      ['{"volumes": {"v": {"heal": "MAYBE"}}}', /state\.volumes\["v"\]\.heal: expected SUCCEED\|FAIL\|NOT_HEALABLE/],
      ['{"volumes": {"v": {"delayMs": -1}}}', /delayMs: expected a number >= 0/],
      ['{"volumes": {"v": {"dataPath": "nfs"}}}', /dataPath: expected reattach\|fuse/],
      ['{"volumes": {"v": {"published": "/t"}}}', /published: expected a list of strings/],
      ['{"volumes": {"v": {"locked": "yes"}}}', /locked: expected a boolean/],
      ['{"volumes": {"v": 1}}', /state\.volumes\["v"\]: expected an object/],
    ] as const) {
      assert.throws(
        () => parseState(text),
        (err: Error) => err instanceof StateFormatError && why.test(err.message),
        text,
      );
    }
  });

  it("the upstream services' part: an entry left empty gets the documented defaults, one written in full keeps every value", () => {
    const empty = resolveState(parseState('{"space": {"v": {}}, "replication": {"volume:v": {}}, "groups": {"g": {}}, "keyRotations": {"v": 0}}')).addons;
    assert.deepEqual(empty.space, { v: { usedBytes: 0, reclaimableBytes: 0, reclaimedBytes: 0 } });
    assert.deepEqual(empty.replication, { "volume:v": { enabled: false, role: "primary", resyncs: 0, destination: "", lastSyncTime: "" } });
    assert.deepEqual(empty.groups, { g: { name: "", volumeIds: [], context: {} } });
    assert.deepEqual(empty.keyRotations, { v: 0 }, "0 is a count");
    assert.deepEqual(empty.fenced, []);
    assert.deepEqual(empty.fenceClients, []);
    const full = {
      space: { v: { usedBytes: 10, reclaimableBytes: 4, reclaimedBytes: 2 } },
      keyRotations: { v: 3 },
      fenced: ["10.0.0.0/24"],
      fenceClients: [{ id: "client-1", addresses: ["10.0.0.7/32"] }],
      replication: { "volume:v": { enabled: true, role: "secondary", resyncs: 2, destination: "v-dst", lastSyncTime: "2026-12-05T00:00:00Z" } },
      groups: { g: { name: "group", volumeIds: ["v"], context: { k: "x" } } },
    };
    assert.deepEqual(resolveState(parseState(JSON.stringify(full))).addons, full);
    // Read and written back as it was: no default added to the file.
    assert.deepEqual(JSON.parse(JSON.stringify(parseState('{"space": {"v": {"usedBytes": 1}}, "replication": {"volume:v": {"role": "primary"}}}'))), {
      space: { v: { usedBytes: 1 } },
      replication: { "volume:v": { role: "primary" } },
    });
  });

  it("rejects an upstream services' entry it cannot use, naming where", () => {
    for (const [text, why] of [
      ['{"keyRotations": {"v": -1}}', /state\.keyRotations\["v"\]: expected a count/],
      ['{"keyRotations": {"v": 1.5}}', /state\.keyRotations\["v"\]: expected a count/],
      ['{"keyRotations": {"v": "3"}}', /state\.keyRotations\["v"\]: expected a count/],
      ['{"keyRotations": []}', /state\.keyRotations: expected an object/],
      ['{"space": {"v": {"usedBytes": -5}}}', /state\.space\["v"\]\.usedBytes: expected a byte count/],
      ['{"space": {"v": {"freeBytes": 5}}}', /state\.space\["v"\]: unknown key "freeBytes"/],
      ['{"replication": {"volume:v": {"role": "tertiary"}}}', /role: expected primary\|secondary/],
      ['{"replication": {"volume:v": {"resyncs": 2.5}}}', /resyncs: expected a count/],
      ['{"groups": {"g": {"context": {"k": 1}}}}', /state\.groups\["g"\]\.context: expected an object of strings/],
      ['{"groups": {"g": {"context": "k=v"}}}', /context: expected an object of strings/],
      ['{"groups": {"g": {"volumeIds": ["v", 2]}}}', /volumeIds: expected an array of strings/],
      ['{"fenced": "10.0.0.0/24"}', /state\.fenced: expected an array of CIDR strings/],
      ['{"fenceClients": {"id": "c"}}', /state\.fenceClients: expected an array/],
      ['{"fenceClients": [{"id": 7}]}', /state\.fenceClients\[0\]\.id: expected a string/],
    ] as const) {
      assert.throws(
        () => parseState(text),
        (err: Error) => err instanceof StateFormatError && why.test(err.message),
        text,
      );
    }
  });

  it("resolves one volume spec once (the same object each time: a heal burst reads it often)", () => {
    const spec = { state: "ABNORMAL" as const };
    assert.equal(resolveVolume(spec), resolveVolume(spec));
  });

  it("a healed volume becomes HEALTHY with its fault cleared and everything else kept", () => {
    const before = parseState(
      '{"ready": true, "volumes": {"v": {"state": "ABNORMAL", "reason": "R", "message": "M", "delayMs": 5}, "w": {"state": "ABNORMAL"}}}',
    );
    assert.deepEqual(JSON.parse(JSON.stringify(healVolume(before, "v"))), {
      ready: true,
      volumes: { v: { state: "HEALTHY", delayMs: 5 }, w: { state: "ABNORMAL" } },
    });
  });
});

/**
 * A state store on a new file holding `content`, closed after the test. Unless `warned` is asked
 * for, anything the store says fails the test.
 */
function storeOn(t: TestContext, content: string, opts: { warned?: string[] } = {}) {
  const dir = tempDir("state-store-");
  const file = join(dir, "state.json");
  writeFileSync(file, content);
  const { warned } = opts;
  const store = new StateStore(file, warned ? (line) => void warned.push(line) : (line) => assert.fail(line));
  t.after(() => store.close());
  return { dir, file, store };
}

describe("driver-stub state store", () => {
  it("a heal and an edit of the file made before the heal is written both end up in memory and in the file", async (t) => {
    const state = (volumes: object) => JSON.stringify({ volumes });
    const { file, store } = storeOn(t, state({ v: { state: "ABNORMAL", reason: "R" }, w: { state: "ABNORMAL" } }));
    store.markHealed("v");
    assert.equal(store.current().volumes.get("v")?.state, "HEALTHY", "in memory at once");
    // Before the store's write (the next turn of the event loop): someone adds a volume.
    writeFileSync(file, state({ v: { state: "ABNORMAL", reason: "R" }, w: { state: "ABNORMAL" }, x: { state: "UNSUPPORTED" } }));
    await store.written();
    const expected = { volumes: { v: { state: "HEALTHY" }, w: { state: "ABNORMAL" }, x: { state: "UNSUPPORTED" } } };
    assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), expected);
    assert.deepEqual(Object.fromEntries([...store.current().volumes].map(([id, v]) => [id, v.state])), { v: "HEALTHY", w: "ABNORMAL", x: "UNSUPPORTED" });
  });

  it("two changes in one turn are each applied once, in memory and in the file", async (t) => {
    const { file, store } = storeOn(t, "{}");
    const rotate = (raw: StubState) => ({ ...raw, keyRotations: { v: (raw.keyRotations?.["v"] ?? 0) + 1 } });
    store.update(rotate);
    assert.deepEqual(store.update(rotate).addons.keyRotations, { v: 2 });
    await store.written();
    assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), { keyRotations: { v: 2 } });
  });

  it("a change made right before close() still reaches the file", (t) => {
    const { file, store } = storeOn(t, JSON.stringify({ volumes: { v: { state: "ABNORMAL" } } }));
    store.markHealed("v");
    store.close();
    assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), { volumes: { v: { state: "HEALTHY" } } });
  });

  it("the file deleted before a change is written: the change is written on an empty state", async (t) => {
    const { file, store } = storeOn(t, JSON.stringify({ volumes: { v: {} }, fenced: ["10.0.0.0/8"] }));
    store.update((raw) => ({ ...raw, keyRotations: { v: 1 } }));
    rmSync(file);
    await store.written();
    assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), { keyRotations: { v: 1 } });
  });

  it("a write that fails is said on stderr, and the change stays in memory", async (t) => {
    const warned: string[] = [];
    const { dir, file, store } = storeOn(t, JSON.stringify({ volumes: { v: { state: "ABNORMAL" } } }), { warned });
    store.markHealed("v");
    rmSync(dir, { recursive: true });
    await store.written();
    assert.equal(warned.filter((l) => l.startsWith(`warning: cannot write state file ${file} (`)).length, 1, warned.join("\n"));
    assert.equal(store.current().volumes.get("v")?.state, "HEALTHY");
  });

  it("a malformed file is said at once, at start and when it is edited, before any request reads it", async (t) => {
    const warned: string[] = [];
    const { file } = storeOn(t, "{", { warned });
    assert.match(warned.join("\n"), /state file .* is malformed/, "at start");
    writeFileSync(file, JSON.stringify({ volumes: { v: {} } }));
    // Replaced by rename, as editors and the tests' writers do: the watch is on the directory.
    writeFileSync(`${file}.tmp`, '{"volumes": []}');
    renameSync(`${file}.tmp`, file);
    await waitFor("the edit said", () => warned.some((l) => /state\.volumes: expected an object/.test(l)));
  });
});

describe("driver-stub --help", () => {
  it("the state file's shape it shows gives every field its default (the first of alternatives), as the stub resolves an entry left empty", () => {
    const shape = USAGE.slice(USAGE.indexOf("Shape:") + "Shape:".length, USAGE.indexOf("The stub writes"))
      .replace(/\([^()"]*\),/g, ",") // a remark between members
      .replace(/"([^"|]*)(\|[^"]*)+"/g, '"$1"'); // "A|B|C": A
    const shown = resolveState(parseState(shape));
    const empty = resolveState(
      parseState('{"volumes": {"v": {}}, "space": {"v": {}}, "replication": {"volume:v": {}}, "groups": {"g": {}}, "fenceClients": [{}]}'),
    );
    assert.equal(shown.ready, empty.ready);
    assert.deepEqual(shown.capabilities, empty.capabilities);
    assert.deepEqual(shown.volumes.get("<id>"), empty.volumes.get("v"));
    assert.deepEqual(shown.addons.space["<id>"], empty.addons.space["v"]);
    assert.deepEqual(shown.addons.replication["volume:<id>"], empty.addons.replication["volume:v"]);
    assert.deepEqual(shown.addons.groups["<group id>"], empty.addons.groups["g"]);
    assert.deepEqual(shown.addons.keyRotations, { "<id>": 0 }, "a count that starts at 0");
    assert.equal(shown.addons.fenceClients[0]!.id, empty.addons.fenceClients[0]!.id);
  });

  it("says what the call log puts in place of a secret value", () => {
    const [, prefix, digits, hash] = /"(\w+:)" and (\d+) hex digits of their (SHA-\d+)/.exec(USAGE.replace(/\s+/g, " "))!;
    assert.equal(hash, "SHA-256");
    assert.equal(prefix, "sha256:");
    assert.match(secretDigest("x"), new RegExp(`^${prefix}[0-9a-f]{${digits}}$`));
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
    release(); // even once the volume is someone else's: it stays theirs
    assert.equal(locks.tryAcquire("v"), undefined);
  });
});
