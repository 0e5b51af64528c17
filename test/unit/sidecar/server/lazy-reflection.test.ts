// gRPC reflection built on its first call (sidecar/server/lazy-reflection.ts), in process: a stream
// carries as many requests as the client sends (grpcurl asks several on one), ends when the client
// ends it, and a reflection service that cannot be built answers INTERNAL and is tried again.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { addLazyReflection } from "../../../../sidecar/server/lazy-reflection.js";
import { bindServer } from "../../../../sidecar/server/grpc-server.js";
import { reflectionStub } from "../../../support/reflection.js";

const healthProto = createRequire(import.meta.url).resolve("grpc-health-check/proto/health/v1/health.proto");

let loads = 0;
const server = new grpc.Server();
addLazyReflection(server, async () => {
  if (++loads === 1) throw new Error("descriptors not readable");
  return new ReflectionService(protoLoader.loadSync(healthProto, { keepCase: true }), { services: ["grpc.health.v1.Health"] });
});
const port = await bindServer(server, "127.0.0.1:0", grpc.ServerCredentials.createInsecure());
const client = reflectionStub(`127.0.0.1:${port}`);
after(() => {
  client.close();
  server.forceShutdown();
});

/** Sends `requests` on one stream, each after the answer to the one before, then ends it: the answers and how the stream ended. */
function exchange(requests: Record<string, string>[]): Promise<{ answers: any[]; status: grpc.StatusObject }> {
  return new Promise((done) => {
    const answers: any[] = [];
    const stream = client.ServerReflectionInfo({ deadline: Date.now() + 10_000 });
    const next = () => (answers.length < requests.length ? stream.write(requests[answers.length]) : stream.end());
    stream.on("data", (r: any) => {
      answers.push(r);
      next();
    });
    stream.on("error", () => {});
    stream.on("status", (status: grpc.StatusObject) => done({ answers, status }));
    next();
  });
}

test("reflection that cannot be built answers INTERNAL naming why, and is built again at the next call", async () => {
  const failed = await exchange([{ list_services: "" }]);
  assert.deepEqual(
    [failed.status.code, failed.status.details, failed.answers.length],
    [grpc.status.INTERNAL, "reflection unavailable: descriptors not readable", 0],
  );
  const served = await exchange([{ list_services: "" }]);
  assert.equal(served.status.code, grpc.status.OK, served.status.details);
  assert.deepEqual(
    served.answers[0].list_services_response.service.map((s: { name: string }) => s.name),
    ["grpc.health.v1.Health"],
  );
  assert.equal(loads, 2);
});

test("one stream answers each request in turn (as grpcurl asks them) and ends, OK, when the client ends it", async () => {
  const { answers, status } = await exchange([{ list_services: "" }, { file_containing_symbol: "grpc.health.v1.Health" }, { list_services: "" }]);
  assert.equal(status.code, grpc.status.OK, status.details);
  const kind = (a: any) => (a.list_services_response ? "services" : a.file_descriptor_response ? "descriptor" : JSON.stringify(a));
  assert.deepEqual(answers.map(kind), ["services", "descriptor", "services"]);
  const file = Buffer.concat(answers[1].file_descriptor_response.file_descriptor_proto).toString("latin1");
  assert.ok(file.includes("HealthCheckRequest"), "the descriptor of the symbol asked for");
});
