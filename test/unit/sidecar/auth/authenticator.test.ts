// The auth middleware when the Kubernetes API cannot answer: the caller gets UNAVAILABLE saying
// what the API said (its status and reason, or that it was unreachable), and the failure is not
// remembered: the next call asks the API again; a decision is, for many callers at once. The API
// here is a fake of the two review calls.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Metadata } from "@grpc/grpc-js";
import { authMiddleware } from "../../../../sidecar/auth/authenticator.js";
import { DomainError } from "../../../../sidecar/errors.js";
import { KubeError, type KubeApi } from "../../../../sidecar/kube/api.js";
import type { CallContext } from "../../../../sidecar/server/context.js";
import { captureLogger } from "../../../support/capture-logger.js";

function call(token = "caller-token"): CallContext {
  const metadata = new Metadata();
  metadata.set("authorization", `Bearer ${token}`);
  return {
    method: "/sidecar.v1.VolumeHealer/HealVolume",
    metadata,
    peer: "ipv4:10.0.0.9:5000",
    deadline: Infinity,
    signal: new AbortController().signal,
    fields: {},
    logger: captureLogger().logger,
  };
}

test("auth: an API that cannot answer → UNAVAILABLE naming what it said; not cached, the next call asks again", async () => {
  let failure: unknown;
  let reviews = 0;
  const kube = {
    reviewToken: async () => {
      reviews++;
      throw failure;
    },
    reviewAccess: async () => true,
  } as unknown as KubeApi;
  const auth = authMiddleware({
    kube,
    audiences: ["csi-addons"],
    namespace: "csi",
    rule: { verb: "create", group: "csiaddons.openshift.io", resource: "csiaddonsnodes" },
    cacheTtlMs: 60_000,
  });
  const next = async () => "served";
  const refusal = async (f: unknown) => {
    failure = f;
    const err = await auth({}, call(), next).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof DomainError, String(err));
    assert.equal(err.kind, "Unavailable");
    return err.message;
  };
  assert.equal(
    await refusal(new KubeError(503, "ServiceUnavailable", "etcd is down")),
    "cannot verify the caller right now (Kubernetes API: 503 ServiceUnavailable); retry",
  );
  assert.equal(
    await refusal(new KubeError(0, "Unavailable", "Kubernetes API unreachable: ECONNREFUSED")),
    "cannot verify the caller right now (Kubernetes API: unreachable Unavailable); retry",
  );
  assert.equal(await refusal(new Error("socket hang up")), "cannot verify the caller right now (Kubernetes API: error); retry");
  assert.equal(reviews, 3, "each failed call asked the API: a failure is not cached");
});

test("auth: decisions are kept per token for many callers at once: callers taking turns are asked about once each", async () => {
  const reviewed: string[] = [];
  const kube = {
    reviewToken: async (token: string) => (reviewed.push(token), { username: `system:serviceaccount:csi:${token}` }),
    reviewAccess: async () => true,
  } as unknown as KubeApi;
  const auth = authMiddleware({
    kube,
    audiences: ["csi-addons"],
    namespace: "csi",
    rule: { verb: "create", group: "csiaddons.openshift.io", resource: "csiaddonsnodes" },
    cacheTtlMs: 60_000,
  });
  const callers = ["controller-a", "controller-b", "upstream"];
  for (let round = 0; round < 3; round++) {
    for (const token of callers) assert.equal(await auth({}, call(token), async () => "served"), "served");
  }
  assert.deepEqual(reviewed, callers, "one TokenReview per caller, not per call");
});
