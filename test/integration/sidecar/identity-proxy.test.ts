// identity.Identity is passed through as raw bytes: a capability newer than our proto (an
// unknown oneof field) reaches the controller byte for byte.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import type { KubeApi } from "../../kube/index.js";
import { serveFakeDriver, startTestKube } from "../../support/cluster.js";
import { startSidecarProc, waitHealth, type SidecarProc } from "../../support/sidecar.js";
import { tempDir } from "../../support/proc.js";
import { call, rawUnary } from "../../support/grpc.js";
import { reflectionClient } from "../../support/reflection.js";
import { reasonFor } from "../../support/heal-request.js";

const NAME = "raw.csi.example.com";
const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ""), "hex");
// GetCapabilitiesResponse: Service NODE_SERVICE; an unknown capability at oneof field 8 {type: 1};
// VolumeHealer GET_VOLUME_HEALTH (field 7). Written from the field numbers, not by an encoder.
const CAPABILITIES = hex("0a04 0a020802  0a04 42020801  0a04 3a020801");
const IDENTITY = Buffer.concat([hex("0a"), Buffer.from([NAME.length]), Buffer.from(NAME), hex("1205 312e322e33")]);

const raw = (b: Buffer) => b;
let driver: grpc.Server;
let kube: KubeApi;
let sidecar: SidecarProc;

before(async () => {
  const dir = tempDir();
  const socket = join(dir, "addons.sock");
  const method = (name: string) => ({
    path: `/identity.Identity/${name}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  });
  const answer =
    (bytes: Buffer): grpc.handleUnaryCall<Buffer, Buffer> =>
    (_call, cb) =>
      cb(null, bytes);
  driver = await serveFakeDriver(
    socket,
    { GetIdentity: method("GetIdentity"), GetCapabilities: method("GetCapabilities"), Probe: method("Probe") },
    { GetIdentity: answer(IDENTITY), GetCapabilities: answer(CAPABILITIES), Probe: answer(Buffer.alloc(0)) },
  );
  kube = await startTestKube();
  sidecar = await startSidecarProc({ driverSocket: socket, kubeconfig: kube.kubeconfigPath });
  await waitHealth(sidecar, "SERVING");
});

after(async () => {
  await sidecar?.stop();
  driver?.forceShutdown();
  await kube?.stop();
});

async function rawCall(path: string): Promise<Buffer> {
  const client = new grpc.Client(sidecar.address, grpc.credentials.createInsecure());
  try {
    const r = await rawUnary(client, path, Buffer.alloc(0));
    assert.equal(r.code, grpc.status.OK, `${path}: ${r.details}`);
    return r.value;
  } finally {
    client.close();
  }
}

test("GetCapabilities reaches the caller byte for byte, unknown oneof field 8 included", async () => {
  assert.deepEqual(await rawCall("/identity.Identity/GetCapabilities"), CAPABILITIES);
});

test("GetIdentity and Probe are passed through unchanged", async () => {
  assert.deepEqual(await rawCall("/identity.Identity/GetIdentity"), IDENTITY);
  assert.deepEqual(await rawCall("/identity.Identity/Probe"), Buffer.alloc(0));
});

test("the sidecar itself decodes the known capabilities: health offered, heal not", async () => {
  const client = sidecar.healer();
  const r = await call(client, client.healVolume, { pvName: "pv-any", mode: 1, reason: reasonFor(1) });
  assert.equal(r.ok, false);
  assert.equal((r as { code: number }).code, grpc.status.UNIMPLEMENTED);
  assert.match((r as { details: string }).details, /raw\.csi\.example\.com does not offer the VolumeHealer HEAL_VOLUME capability/);
  const h = await call(client, client.getVolumeHealth, { pvName: "pv-any" });
  assert.equal((h as { code: number }).code, grpc.status.NOT_FOUND, "past the capability check: the PV lookup answers");
});

test("gRPC reflection lists exactly the services this port serves", async () => {
  const reflection = reflectionClient(sidecar.address);
  let names: string[];
  try {
    names = await reflection.services();
    // Each served service's descriptor is there too (grpcurl describe), health included.
    const healthFile = await reflection.describe("grpc.health.v1.Health");
    for (const name of ["grpc.health.v1", "HealthCheckResponse", "ServingStatus", "Watch"]) assert.ok(healthFile.includes(name), name);
    // Field names as the .proto spells them (grpcurl shows and sends these), not camelCased.
    const healerFile = await reflection.describe("sidecar.v1.VolumeHealer");
    assert.ok(healerFile.includes("pv_name") && !healerFile.includes("pvName"), "pv_name kept");
  } finally {
    reflection.close();
  }
  assert.deepEqual(names, [
    "grpc.health.v1.Health",
    "identity.Identity",
    "proto.EncryptionKeyRotation",
    "proto.NetworkFence",
    "proto.ReclaimSpace",
    "proto.Replication",
    "proto.VolumeGroupController",
    "sidecar.v1.VolumeHealer",
  ]);
});
