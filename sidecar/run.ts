// Wires the parts together and owns their lifecycle; the entry point (main.ts) only adds process
// concerns (signals, exit codes).
import type { Server as HttpServer } from "node:http";
import type * as grpc from "@grpc/grpc-js";
import { authMiddleware } from "./auth/authenticator.js";
import type { Config } from "./config/config.js";
import { DriverConnection } from "./driver/connection.js";
import { grpcCodeName } from "./driver/unary.js";
import { ControllerLease } from "./election/controller-lease.js";
import { Readiness } from "./health/readiness.js";
import type { KubeApi } from "./kube/api.js";
import type { Logger } from "../common/log/logger.js";
import { createMetrics, type Metrics, type RefusalReason } from "./metrics/metrics.js";
import { CSIAddonsNodeManager } from "./node/manager.js";
import { podEndpoint } from "./node/name.js";
import { createHealerService } from "./relay/healer-service.js";
import { Limiter } from "./relay/limiter.js";
import { NodeCache } from "./relay/node-cache.js";
import { PodClaims } from "./relay/pod-claims.js";
import { kubeletRootOf } from "./relay/names.js";
import { PvCache } from "./relay/pv-cache.js";
import { SecretCache } from "./relay/secret-cache.js";
import { AttachRequired } from "./relay/attach-required.js";
import { serverCredentials } from "./server/credentials.js";
import { bindServer, buildGrpcServer } from "./server/grpc-server.js";
import { startHttpServer } from "../common/http/probes.js";
import { watchRefusedConnections } from "./server/refused-connections.js";
import { RefusalTally } from "./server/refusal-tally.js";
import { RepeatedLines } from "./log/repeats.js";
import { hostPort, listenHost } from "../common/net/listen-host.js";
import { deadlineMiddleware, loggingMiddleware } from "./server/middlewares.js";
import { upstreamServices } from "./upstream/services.js";
import type { Middleware } from "./server/context.js";

export interface Sidecar {
  readonly port: number;
  readonly httpPort: number | undefined;
  readonly metrics: Metrics;
  /**
   * NOT_SERVING (health Watch streams ended) → stop accepting → drain in-flight calls (up to the
   * grace period) while releasing a held Lease → close.
   */
  shutdown(): Promise<void>;
}

export async function startSidecar(config: Config, logger: Logger, kube: KubeApi): Promise<Sidecar> {
  for (const { flag, why } of config.ignoredFlags) logger.warn("upstream sidecar flag accepted and ignored", { flag, why });
  const metrics = createMetrics();
  const readiness = new Readiness(logger);
  const driver: DriverConnection = new DriverConnection({
    socketPath: config.csiAddonsSocket,
    callTimeoutMs: Math.min(config.timeoutMs, 30_000),
    logger,
    // Every driver call ends in csi_sidecar_operations_seconds, whichever call site made it.
    observe: (method, code, seconds) => metrics.observeOperation(driver.name, method, grpcCodeName(code), seconds),
  });

  const nodes = new NodeCache(kube, config.nodeId, logger);
  const pods = new PodClaims(kube, config.nodeId, logger);
  if (kubeletRootOf(config.stagingPath) === undefined) {
    logger.warn(
      "--stagingpath does not end in plugins/kubernetes.io/csi, the kubelet's layout: heals name no pod targets, and the driver cannot say which pods are whole again",
      {
        stagingpath: config.stagingPath,
      },
    );
  }
  const pvs = new PvCache(kube, config.pvCacheTtlMs, logger);
  // One bound on driver calls and one secret cache for healing and the upstream services alike.
  const limiter = new Limiter(config.maxInflight, config.maxQueue);
  const secrets = new SecretCache(kube, config.secretCacheTtlMs);
  const healer = createHealerService({
    driver,
    limiter,
    resolver: { kube, attach: new AttachRequired(kube, logger), nodes, pods, pvs, secrets, nodeName: config.nodeId, stagingRoot: config.stagingPath },
  });
  const upstream = upstreamServices({ driver, limiter, kube, secrets, stagingRoot: config.stagingPath });
  const repeats = new RepeatedLines(logger);
  const refusals = new RefusalTally();
  const refused = (reason: RefusalReason, detail: string) => {
    metrics.countRefused(reason);
    refusals.record(reason, detail);
  };
  const middlewares: Middleware[] = [loggingMiddleware({ repeats, onRefused: refused }), deadlineMiddleware(config.timeoutMs)];
  if (config.enableAuth) {
    middlewares.push(
      authMiddleware({
        kube,
        audiences: config.authAudiences,
        namespace: config.namespace,
        rule: config.authz,
        singlePermission: config.authSinglePermission,
        cacheTtlMs: config.authCacheTtlMs,
      }),
    );
    if (config.authSinglePermission) {
      logger.warn("--auth-weaker-single-permission: one permission opens every service (heal, fence, replication, ...); grant per service instead", {
        permission: `${config.authz.verb} ${config.authz.resource}`,
      });
    }
  } else {
    logger.warn("caller authentication is OFF (--enable-auth=false): anyone who reaches the controller port can heal volumes");
  }
  const server = buildGrpcServer({ healer, upstream, driver, readiness, middlewares, logger });
  const tls = await serverCredentials({
    enableTls: config.enableAuth,
    certFile: config.tlsCertFile,
    keyFile: config.tlsKeyFile,
    requireFiles: config.requireTlsFiles,
    commonName: `${config.pod}.${config.namespace}`,
    logger,
    policy: config.tls,
    onCertificate: (source, notAfter) => metrics.setTlsCertificate(source, notAfter),
  });
  if (!config.enableAuth) metrics.setTlsCertificate("none", undefined);
  const port = await bindServer(server, hostPort(listenHost(config.controllerIp), config.controllerPort), tls.credentials);
  if (config.enableAuth) {
    const watched = watchRefusedConnections(server, (reason, peer, error) => {
      refused(reason, error);
      repeats.log("warn", `refused|${reason}`, "connection refused", { reason, peer, error });
    });
    if (!watched) logger.warn("refused TLS connections cannot be observed with this grpc-js version; only refused calls are logged and counted");
  }
  let http: HttpServer | undefined;
  if (config.httpEndpoint) {
    http = await startHttpServer({ ...config.httpEndpoint, host: listenHost(config.httpEndpoint.host) }, readiness, metrics.registry);
  }

  const manager = new CSIAddonsNodeManager({
    kube,
    logger,
    namespace: config.namespace,
    pod: config.pod,
    podUid: config.podUid,
    nodeId: config.nodeId,
    endpoint: podEndpoint(config.pod, config.namespace, port),
    confirmTimeoutMs: config.nodeConfirmTimeoutMs,
    refusals,
    onRecreated: () => metrics.countRecreation(),
  });
  manager.presence.on("change", (c) => readiness.set("node", c.ok, c.reason, c.since));
  const lease = new ControllerLease({ kube, logger, identity: config.pod, config: config.leaderElection });
  driver.on("ready", (ev) => {
    const { info } = ev;
    // A restarted driver has lost its user-space mounts: the CSIAddonsNode tells the controller to heal.
    manager.driverBooted(ev);
    manager.setDriver(info.name);
    lease.follow(info).catch((err: unknown) => logger.error("leader election failed", { reason: err instanceof Error ? err.message : String(err) }));
    readiness.set("driver", true, `driver ${info.name} connected and ready`);
  });
  driver.on("down", (why) => readiness.set("driver", false, `driver not connected or not ready: ${why}`));
  nodes.start();
  driver.start();
  const httpPort = http ? (http.address() as { port: number }).port : undefined;
  logger.info("sidecar started", { controllerPort: port, httpPort, driverSocket: config.csiAddonsSocket, tls: config.enableAuth });

  return {
    port,
    httpPort,
    metrics,
    async shutdown() {
      readiness.close("shutting down");
      // The release (up to ~5 s against a slow API) runs alongside the drain, not before it: waiting
      // for it first would keep accepting calls after NOT_SERVING and push the drain's grace towards
      // the kubelet's SIGKILL. Started first, so a successor can take controller operations while
      // our in-flight calls finish.
      const released = lease
        .stop()
        .catch((err: unknown) => logger.warn("leader election did not stop cleanly", { reason: err instanceof Error ? err.message : String(err) }));
      await drain(server, config.shutdownGraceMs, logger);
      await released;
      await new Promise<void>((resolve) => (http ? http.close(() => resolve()) : resolve()));
      http?.closeAllConnections();
      manager.close();
      nodes.close();
      pods.close();
      pvs.close();
      tls.close();
      driver.close();
      repeats.flush();
      logger.info("sidecar stopped");
    },
  };
}

function drain(server: grpc.Server, graceMs: number, logger: Logger): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      logger.warn("grace period over; cancelling the calls still in flight", { graceMs });
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
