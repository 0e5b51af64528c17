// relay/attach-required over a fake of the one KubeApi call it makes: what each CSIDriver answer
// means, what is kept (answers, a missing CSIDriver, a refusal) and what is asked again (a failed
// read). attach-required.test.ts runs it in the sidecar against the in-memory API, and
// least-privilege.test.ts without the permission.
import { test } from "node:test";
import assert from "node:assert/strict";
import { AttachRequired } from "../../../../sidecar/relay/attach-required.js";
import { KubeError, type CsiDriverInfo, type KubeApi } from "../../../../sidecar/kube/api.js";
import { captureLogger } from "../../../support/capture-logger.js";

type Reply = CsiDriverInfo | undefined | Error;

function fakeKube(replies: Record<string, Reply>) {
  const reads: string[] = [];
  const kube: Pick<KubeApi, "getCsiDriver"> = {
    getCsiDriver: async (name) => {
      reads.push(name);
      const r = replies[name];
      if (r instanceof Error) throw r;
      return r;
    },
  };
  return { kube, reads };
}

const driver = (spec: CsiDriverInfo["spec"]): CsiDriverInfo => ({ metadata: { name: "d" }, spec });
const signal = () => AbortSignal.timeout(5_000);

test("attachRequired false → false, true → true, unset → true (as the kubelet reads it), no CSIDriver → undefined; each kept: one read per driver", async () => {
  const { kube, reads } = fakeKube({
    "noattach.example.com": driver({ attachRequired: false }),
    "attach.example.com": driver({ attachRequired: true }),
    "unset.example.com": driver({}),
    "absent.example.com": undefined,
  });
  const a = new AttachRequired(kube, captureLogger().logger);
  for (let i = 0; i < 3; i++) {
    assert.equal(await a.required("noattach.example.com", signal()), false);
    assert.equal(await a.required("attach.example.com", signal()), true);
    assert.equal(await a.required("unset.example.com", signal()), true);
    assert.equal(await a.required("absent.example.com", signal()), undefined);
  }
  assert.deepEqual(reads, ["noattach.example.com", "attach.example.com", "unset.example.com", "absent.example.com"]);
  // Concurrent questions share one read.
  const shared = fakeKube({ "x.example.com": driver({ attachRequired: false }) });
  const c = new AttachRequired(shared.kube, captureLogger().logger);
  assert.deepEqual(await Promise.all([1, 2, 3].map(() => c.required("x.example.com", signal()))), [false, false, false]);
  assert.deepEqual(shared.reads, ["x.example.com"]);
});

test("after the TTL the CSIDriver is read again (made again by a reinstall, it may say otherwise)", async () => {
  const replies: Record<string, Reply> = { "d.example.com": driver({ attachRequired: false }) };
  const { kube, reads } = fakeKube(replies);
  const a = new AttachRequired(kube, captureLogger().logger, 0);
  assert.equal(await a.required("d.example.com", signal()), false);
  replies["d.example.com"] = driver({ attachRequired: true });
  assert.equal(await a.required("d.example.com", signal()), true);
  assert.equal(reads.length, 2);
});

test("a refusal (403): undefined, warned once saying what to grant, and kept (not a read per heal); a failed read (500): undefined, asked again", async () => {
  const { lines, logger } = captureLogger("debug");
  const replies: Record<string, Reply> = {
    "refused.example.com": new KubeError(403, "Forbidden", "csidrivers is forbidden: 403 Forbidden"),
    "failing.example.com": new KubeError(500, "InternalError", "etcd timeout: 500"),
  };
  const { kube, reads } = fakeKube(replies);
  const a = new AttachRequired(kube, logger);
  for (let i = 0; i < 3; i++) {
    assert.equal(await a.required("refused.example.com", signal()), undefined);
    assert.equal(await a.required("failing.example.com", signal()), undefined);
  }
  assert.deepEqual(reads.filter((r) => r === "refused.example.com").length, 1, "a refusal is kept for the TTL");
  assert.deepEqual(reads.filter((r) => r === "failing.example.com").length, 3, "a failure is asked again");
  const warnings = lines.filter((l) => l["level"] === "warn");
  assert.equal(warnings.length, 1);
  assert.match(String(warnings[0]!["message"]), /grant get on csidrivers: deploy\/base\/cluster-role\.yaml/);
  assert.equal(warnings[0]!["driver"], "refused.example.com");
  // A failed read is no refusal: said at debug level, with the API's reason.
  const failures = lines.filter((l) => l["level"] === "debug" && l["message"] === "could not read the CSIDriver");
  assert.equal(failures.length, 3);
  assert.equal(failures[0]!["reason"], "etcd timeout: 500");

  // Read again at every question (TTL 0), a refusal is still warned once; once readable again, a
  // later refusal is warned again.
  const b = new AttachRequired(kube, logger, 0);
  await b.required("refused.example.com", signal());
  await b.required("refused.example.com", signal());
  assert.equal(lines.filter((l) => l["level"] === "warn").length, 2);
  replies["refused.example.com"] = driver({ attachRequired: false });
  assert.equal(await b.required("refused.example.com", signal()), false);
  replies["refused.example.com"] = new KubeError(403, "Forbidden", "forbidden again");
  await b.required("refused.example.com", signal());
  assert.equal(lines.filter((l) => l["level"] === "warn").length, 3);
});

test("a caller that gives up is answered Cancelled; the read is not kept as a failure", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const reads: string[] = [];
  const kube: Pick<KubeApi, "getCsiDriver"> = {
    getCsiDriver: async (name, s) => {
      reads.push(name);
      await Promise.race([gate, new Promise((_, reject) => s.addEventListener("abort", () => reject(s.reason), { once: true }))]);
      return driver({ attachRequired: false });
    },
  };
  const a = new AttachRequired(kube, captureLogger().logger);
  const gone = new AbortController();
  const asked = a.required("d.example.com", gone.signal);
  gone.abort();
  await assert.rejects(asked, (e: Error) => /cancel/i.test(e.message));
  release();
  assert.equal(await a.required("d.example.com", signal()), false);
  assert.equal(reads.length, 2, "asked again: the cancelled read left nothing behind");
});

test("skipsAttach: true only while a read within the TTL said attachRequired: false; it never reads", async () => {
  const replies: Record<string, Reply> = {
    "noattach.example.com": driver({ attachRequired: false }),
    "attach.example.com": driver({ attachRequired: true }),
    "absent.example.com": undefined,
  };
  const { kube, reads } = fakeKube(replies);
  const a = new AttachRequired(kube, captureLogger().logger);
  for (const name of Object.keys(replies)) assert.equal(a.skipsAttach(name), false, `${name}: not asked yet`);
  assert.deepEqual(reads, [], "asks nothing");
  for (const name of Object.keys(replies)) await a.required(name, signal());
  assert.deepEqual(
    Object.keys(replies).map((name) => a.skipsAttach(name)),
    [true, false, false],
  );
  const expiring = new AttachRequired(kube, captureLogger().logger, 0);
  await expiring.required("noattach.example.com", signal());
  assert.equal(expiring.skipsAttach("noattach.example.com"), false, "past the TTL it is not known any more");
});
