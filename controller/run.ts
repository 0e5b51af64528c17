// Wires the parts together and owns their lifecycle; main.ts only adds process concerns.
// Data flows one way: informers → plan → queue → sidecar calls → report.
// Shutdown order: not ready → stop acting (no new heals; calls in flight get --shutdown-grace to
// answer, then are cancelled; then release leadership) → write the queued Events (bounded) → stop
// informers → close sidecar channels → close the HTTP endpoint.
import type { Server as HttpServer } from "node:http";
import { startHttpServer } from "../common/http/probes.js";
import type { Logger } from "../common/log/logger.js";
import { listenHost } from "../common/net/listen-host.js";
import type { Config } from "./config/config.js";
import { HealController } from "./heal/controller.js";
import type { PassDeps } from "./heal/pass.js";
import { WorkQueue } from "./heal/queue.js";
import { nodeVolumes } from "./heal/node-volumes.js";
import { createKubeWrites, loadKubeConfig } from "./kube/client.js";
import { ClusterCache } from "./kube/cluster.js";
import { LeaseElector } from "../common/election/lease-elector.js";
import { EventRecorder } from "./report/events.js";
import { createMetrics, type Metrics } from "./report/metrics.js";
import { Reporter } from "./report/reporter.js";
import { PodRestarts } from "./heal/pod-restarts.js";
import { channelSetup } from "./sidecars/credentials.js";
import { SidecarPool } from "./sidecars/pool.js";
import type { EndpointRefusedError } from "./sidecars/verify.js";
import type { SidecarInfo } from "./plan/types.js";
import { TokenFile } from "./sidecars/token.js";
import { NodeTokens } from "./sidecars/node-tokens.js";

type OnRefused = (s: SidecarInfo, err: EndpointRefusedError) => void;

export interface Parts {
  cluster: ClusterCache;
  pool: SidecarPool;
  metrics: Metrics;
  passDeps: PassDeps;
  kube: ReturnType<typeof createKubeWrites>;
  events: EventRecorder;
  /** Evicts pods a heal left with a dead mount; only with --restart-pods-not-healed-in-place. */
  restarts: PodRestarts | undefined;
}

/** How long a stopping controller (or a finished heal command) still writes its queued Events. */
export const EVENTS_FLUSH_MS = 5_000;

/** The parts both the controller and the one-shot heal command use. */
export function buildParts(config: Config, logger: Logger): Parts {
  const kc = loadKubeConfig(config.kubeconfig);
  const kube = createKubeWrites(kc);
  // The metrics count the pool's connections when scraped, after the pool below exists.
  const metrics = createMetrics(() => pool.countByState());
  const queue = new WorkQueue({ perNode: config.perNodeConcurrency, global: config.maxConcurrentHeals });
  const events = new EventRecorder(kube, logger, { dropped: metrics.eventsDropped, queued: metrics.eventsQueued }, { heals: queue });
  const restarts = config.podRestarts.enabled
    ? new PodRestarts(kube, events, logger, (driver, result) => metrics.podEvictions.inc({ driver, result }), {
        perNode: config.podRestarts.perNode,
        total: config.podRestarts.total,
        backoff: { initialMs: config.backoffInitialMs, maxMs: config.backoffMaxMs },
      })
    : undefined;
  const reporter = new Reporter(logger, metrics, events, restarts);
  const pool = sidecarPool(config, kube, logger, (s, err) => reporter.endpointRefused(s, err));
  const cluster = new ClusterCache(kc, config.namespace, logger);
  const passDeps: PassDeps = {
    queue,
    pool,
    latest: (key) => cluster.sidecar(key),
    reporter,
    logger,
    retry: { maxAttempts: config.maxAttempts, initialMs: config.backoffInitialMs, maxMs: config.backoffMaxMs, healTimeoutMs: config.healTimeoutMs },
    ...nodeVolumes(cluster, kube, logger),
  };
  return { cluster, pool, metrics, passDeps, kube, events, restarts };
}

/** The sidecars' channels with their tokens: per node (TokenRequest), one from a file (weaker), or none. */
function sidecarPool(config: Config, kube: ReturnType<typeof createKubeWrites>, logger: Logger, onRefused: OnRefused): SidecarPool {
  const setup = channelSetup(config.sidecarTls);
  const verify = { policy: config.endpoints, onRefused };
  if (config.endpoints.allowUnverified) {
    logger.warn(
      "--allow-unverified-endpoints: a CSIAddonsNode with a plain host:port endpoint is called unverified, so whoever writes one gets that node's calls and token",
    );
  }
  if (config.tokenServiceAccount) {
    const tokens = new NodeTokens(kube, config.tokenServiceAccount, config.tokenExpirationSeconds);
    return new SidecarPool(
      kube,
      setup,
      (node, signal) => tokens.get(node, signal),
      (node, token) => tokens.refused(node, token),
      verify,
    );
  }
  if (config.tokenFile) {
    logger.warn("--token-file: one token for every sidecar, so whoever reads it on one node can replay it to all; --service-account gives each node its own");
    const file = new TokenFile(config.tokenFile);
    return new SidecarPool(kube, setup, () => file.read(), undefined, verify);
  }
  return new SidecarPool(kube, setup, () => undefined, undefined, verify);
}

export interface Controller {
  readonly httpPort: number | undefined;
  shutdown(): Promise<void>;
}

export async function startController(config: Config, logger: Logger): Promise<Controller> {
  const { cluster, pool, metrics, passDeps, kube, events, restarts } = buildParts(config, logger);
  let synced = false;
  let stopping = false;
  const readiness = {
    get ready() {
      return synced && !stopping;
    },
    reason: () => (stopping ? "shutting down" : synced ? "caches synced" : "waiting for the informer caches"),
  };
  let http: HttpServer | undefined;
  if (config.httpEndpoint) http = await startHttpServer({ ...config.httpEndpoint, host: listenHost(config.httpEndpoint.host) }, readiness, metrics.registry);
  const httpPort = http ? (http.address() as { port: number }).port : undefined;

  const healer = new HealController({
    view: cluster,
    kube,
    pass: passDeps,
    metrics,
    logger,
    checkIntervalMs: config.checkIntervalMs,
    restartHealMode: config.restartHealMode,
  });
  metrics.watchWaiting(() => healer.waiting());
  await cluster.start();
  synced = true;
  let elector: LeaseElector | undefined;
  if (config.leader.enabled) {
    const { namespace, name, identity } = config.leader;
    const lease = `${namespace}/${name}`;
    elector = new LeaseElector({
      ...config.leader,
      lease,
      logger,
      store: { read: (signal) => kube.readLease(namespace, name, signal), write: (r, rv, signal) => kube.writeLease(namespace, name, r, rv, signal) },
    });
    elector.on("leading", (on) => {
      logger.info(on ? "became leader" : "stopped leading", { lease, identity });
      if (on) healer.lead();
      else healer.unlead();
    });
    elector.start();
  } else {
    healer.lead();
  }
  logger.info("controller started", {
    httpPort,
    leaderElection: config.leader.enabled,
    identity: config.leader.identity,
    namespace: config.namespace ?? "(all)",
  });

  return {
    httpPort,
    async shutdown() {
      stopping = true;
      await healer.close(config.shutdownGraceMs);
      restarts?.close();
      await elector?.stop();
      await events.flush(EVENTS_FLUSH_MS);
      cluster.stop();
      pool.close();
      await new Promise<void>((resolve) => (http ? http.close(() => resolve()) : resolve()));
      http?.closeAllConnections();
      logger.info("controller stopped");
    },
  };
}
