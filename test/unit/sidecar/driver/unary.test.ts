// sidecar/driver/unary.ts: which failures are the driver's gRPC statuses (passed on unchanged)
// and which are not (a Node error, a thrown string), and the names of the codes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Metadata, status } from "@grpc/grpc-js";
import { grpcCodeName, isDeadlineStatus, isServiceError } from "../../../../sidecar/driver/unary.js";

test("a gRPC status is a numeric code with details; a Node error, a bare code or a thrown string is not", () => {
  const grpcError = Object.assign(new Error("4 DEADLINE_EXCEEDED: late"), { code: status.DEADLINE_EXCEEDED, details: "late", metadata: new Metadata() });
  assert.equal(isServiceError(grpcError), true);
  assert.equal(isDeadlineStatus(grpcError), true);
  assert.equal(isServiceError(Object.assign(new Error("connect ENOENT"), { code: "ENOENT" })), false);
  assert.equal(isServiceError({ code: 14 }), false, "a code without details");
  assert.equal(isServiceError("boom"), false);
  assert.equal(isServiceError(null), false);
  assert.equal(isDeadlineStatus({ ...grpcError, code: status.UNAVAILABLE }), false);
  assert.equal(grpcCodeName(status.NOT_FOUND), "NOT_FOUND");
  assert.equal(grpcCodeName(99), "99", "a code no gRPC version defines");
});
