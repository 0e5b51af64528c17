// The controller's Prometheus metrics (DESIGN 7.4), on their own registry with the default
// process metrics.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface Metrics {
  registry: Registry;
  heals: Counter<"driver" | "trigger" | "result">;
  healSeconds: Histogram<"driver" | "mode">;
  restartHealSeconds: Histogram<"driver">;
  volumesAbnormal: Gauge<"driver" | "node">;
  leader: Gauge;
  eventsDropped: Counter;
  /** Sidecars whose driver does not offer VolumeHealer (left alone), by driver. */
  sidecarsNotHealing: Gauge<"driver">;
  /** Sidecar endpoints not called: not verified as the sidecar of the node their CSIAddonsNode claims. */
  endpointsRefused: Counter<"driver" | "reason">;
  podsAfterHeal: Counter<"driver" | "state">;
  podEvictions: Counter<"driver" | "result">;
  eventsQueued: Gauge;
  /** Where the heal-work gauges read from (the heal controller, built after the metrics). */
  watchWaiting(source: () => readonly WaitingWork[]): void;
}

/** Heal work not answered yet, of one trigger. */
export interface WaitingWork {
  trigger: string;
  volumes: number;
  nodes: number;
  oldestSeconds: number;
}

/** Every trigger a pass can have: each exported, 0 when none waits, so a dashboard sees it drop to zero. */
const TRIGGERS = ["restart", "reconnect", "first-sight", "periodic"];

export function createMetrics(connections: () => Record<string, number>): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  new Gauge({
    name: "csi_addons_healer_sidecar_connections",
    help: "Sidecars by the state of the controller's connection to them",
    labelNames: ["state"],
    registers,
    collect() {
      for (const [state, n] of Object.entries(connections())) this.set({ state }, n);
    },
  });
  let waiting: () => readonly WaitingWork[] = () => [];
  const waitingGauge = (name: string, help: string, pick: (w: WaitingWork) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ["trigger"],
      registers,
      collect() {
        const now = new Map(waiting().map((w) => [w.trigger, pick(w)]));
        for (const trigger of TRIGGERS) this.set({ trigger }, now.get(trigger) ?? 0);
      },
    });
  waitingGauge("csi_addons_healer_volumes_waiting", "Volumes of running passes not answered yet, by trigger", (w) => w.volumes);
  waitingGauge("csi_addons_healer_nodes_waiting", "Nodes with a pass not finished yet, by trigger", (w) => w.nodes);
  waitingGauge("csi_addons_healer_oldest_wait_seconds", "Age of the oldest pass not finished yet, by trigger", (w) => w.oldestSeconds);
  return {
    registry,
    watchWaiting: (source) => void (waiting = source),
    heals: new Counter({
      name: "csi_addons_healer_heals_total",
      help: "HealVolume calls by final answer",
      labelNames: ["driver", "trigger", "result"],
      registers,
    }),
    healSeconds: new Histogram({
      name: "csi_addons_healer_heal_duration_seconds",
      help: "Latency of one HealVolume call to a sidecar",
      labelNames: ["driver", "mode"],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180],
      registers,
    }),
    restartHealSeconds: new Histogram({
      name: "csi_addons_healer_restart_heal_duration_seconds",
      help: "Time from a driver restart (or a new node-plugin pod) to the last volume of that node answered",
      labelNames: ["driver"],
      buckets: [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600],
      registers,
    }),
    volumesAbnormal: new Gauge({
      name: "csi_addons_healer_volumes_abnormal",
      help: "Volumes whose last answer left them ABNORMAL",
      labelNames: ["driver", "node"],
      registers,
    }),
    leader: new Gauge({ name: "csi_addons_healer_leader", help: "1 while this replica is the leader (or runs without leader election)", registers }),
    sidecarsNotHealing: new Gauge({
      name: "csi_addons_healer_sidecars_not_healing",
      help: "Sidecars whose driver does not offer VolumeHealer: their volumes are neither checked nor healed",
      labelNames: ["driver"],
      registers,
    }),
    endpointsRefused: new Counter({
      name: "csi_addons_healer_sidecar_endpoints_refused_total",
      help: "CSIAddonsNode endpoints not called (no token, no call): not verified as the sidecar pod of the node the object claims, by reason",
      labelNames: ["driver", "reason"],
      registers,
    }),
    podsAfterHeal: new Counter({
      name: "csi_addons_healer_heal_pods_total",
      help: "Pods using a healed volume, by what the driver said they see: WHOLE_IN_PLACE, RESTART_NEEDED (left with the dead mount until restarted), NOT_MOUNTED, UNKNOWN",
      labelNames: ["driver", "state"],
      registers,
    }),
    podEvictions: new Counter({
      name: "csi_addons_healer_pod_evictions_total",
      help: "Pods left with a dead mount, by what their eviction came to: evicted, gone (before it), delayed (a disruption budget said not now; tried again), skipped (no controller, or opted out), failed",
      labelNames: ["driver", "result"],
      registers,
    }),
    eventsDropped: new Counter({
      name: "csi_addons_healer_events_dropped_total",
      help: "Events not written because the backlog of events to write was full",
      registers,
    }),
    eventsQueued: new Gauge({ name: "csi_addons_healer_events_queued", help: "Events waiting to be written, and the one being written", registers }),
  };
}
