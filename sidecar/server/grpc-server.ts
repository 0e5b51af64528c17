// The controller-facing gRPC server: VolumeHealer, the identity pass-through and the upstream
// csi-addons services behind the middleware chain; health and reflection stay open (kubelet and
// operators probe them).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import type { PackageDefinition } from "@grpc/proto-loader";
import { VolumeHealerService } from "../../proto/gen/sidecar/v1/healer.js";
import type { DriverConnection } from "../driver/connection.js";
import { addHealthService } from "../health/grpc-health.js";
import type { Readiness } from "../health/readiness.js";
import type { Logger } from "../../common/log/logger.js";
import type { HealerService } from "../relay/healer-service.js";
import type { ServedService } from "../upstream/services.js";
import type { Middleware, Next } from "./context.js";
import { identityProxyDefinition, identityProxyHandlers } from "./identity-proxy.js";
import { addLazyReflection } from "./lazy-reflection.js";
import { unaryHandler } from "./unary-handler.js";
import { commonJs } from "../util/common-js.js";

export interface GrpcServerDeps {
  healer: HealerService;
  /** The upstream csi-addons controller-facing services (DESIGN 8). */
  upstream: ServedService[];
  driver: DriverConnection;
  readiness: Readiness;
  middlewares: Middleware[];
  logger: Logger;
}

/**
 * Upstream's (grpc-go's default): the upstream controllers send what it accepts, e.g. a
 * CreateVolumeGroup of ~1000 volume ids or a fence's long CIDR list, well past 64 KiB, and retry a
 * refusal forever. sidecar.v1 requests are tiny (a PV name) and would be safe at 64 KiB, but grpc-js
 * takes this limit per server, not per service, and both kinds share this server; the cost is that a
 * hostile client may make one call buffer up to 4 MiB (gzip bombs included) before it is refused.
 */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export function buildGrpcServer(deps: GrpcServerDeps): grpc.Server {
  const server = new grpc.Server({
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
    // Metadata size: grpc-js ignores "grpc.max_metadata_size"; see MAX_METADATA_BYTES in unary-handler.ts.
  });
  const { middlewares, logger } = deps;
  server.addService(VolumeHealerService, {
    getVolumeHealth: unaryHandler(VolumeHealerService.getVolumeHealth.path, deps.healer.getVolumeHealth, middlewares, logger),
    healVolume: unaryHandler(VolumeHealerService.healVolume.path, deps.healer.healVolume, middlewares, logger),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- handlers of one service have different request and response types
  const addUnary = (definition: grpc.ServiceDefinition, handlers: Record<string, Next<any, any>>) =>
    server.addService(
      definition,
      Object.fromEntries(Object.entries(definition).map(([name, def]) => [name, unaryHandler(def.path, handlers[name]!, middlewares, logger)])),
    );
  addUnary(identityProxyDefinition(), identityProxyHandlers(deps.driver));
  for (const svc of deps.upstream) addUnary(svc.definition, svc.handlers);
  addHealthService(server, deps.readiness);
  // Only what this server answers: the imported driver-facing and CSI services are not served here.
  const served = [...SERVED, ...deps.upstream.map((s) => s.name)];
  const protoFiles = deps.upstream.map((s) => s.protoFile);
  addLazyReflection(
    server,
    async () => new (commonJs(await import("@grpc/reflection")).ReflectionService)(await loadDescriptors(protoFiles), { services: served }),
  );
  return server;
}

export function bindServer(server: grpc.Server, address: string, creds: grpc.ServerCredentials): Promise<number> {
  return new Promise((resolve, reject) => server.bindAsync(address, creds, (err, port) => (err ? reject(err) : resolve(port))));
}

const SERVED = ["sidecar.v1.VolumeHealer", "identity.Identity", "grpc.health.v1.Health"] as const;

/** Loaded at the first reflection call: protobufjs's parser costs start-up time and memory. */
async function loadDescriptors(extraProtoFiles: string[]): Promise<PackageDefinition> {
  const protoLoader = commonJs(await import("@grpc/proto-loader"));
  const files = ["sidecar/v1/healer.proto", "identity/identity.proto", "grpc/health/v1/health.proto", ...extraProtoFiles];
  return protoLoader.loadSync(files, { includeDirs: [protoRoot()], keepCase: true });
}

/** proto/ ships beside sidecar/ both in the repository and in the image (dist/ is one level deeper). */
function protoRoot(): string {
  let dir = dirname(new URL(import.meta.url).pathname);
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, "proto");
    if (existsSync(join(candidate, "sidecar/v1/healer.proto"))) return candidate;
    dir = dirname(dir);
  }
  throw new Error("cannot find the proto/ folder for gRPC reflection");
}
