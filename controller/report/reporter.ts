// One place that turns a heal decision into its reports: one JSON log line per decision (every
// attempt, retry or not), and for final answers the metrics and the Events.
import type { Logger } from "../../common/log/logger.js";
import type { Mode, PodAnswer, PvInfo, SidecarInfo, Trigger } from "../plan/types.js";
import type { EndpointRefusedError } from "../sidecars/verify.js";
import type { EventRecorder } from "./events.js";
import type { Metrics } from "./metrics.js";

export interface HealOutcome {
  sidecar: SidecarInfo;
  pv: PvInfo;
  trigger: Trigger;
  mode: Mode;
  attempt: number;
  durationMs: number;
  /** The sidecar's answer (result and health after it), or the status the call ended with. */
  result: string;
  health?: string;
  message: string;
  /** Each pod on the node that uses the volume, as the driver answered (an answer only). */
  pods?: readonly PodAnswer[];
  /** Set when the call will be tried again. */
  retryInMs?: number;
}

export class Reporter {
  constructor(
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    private readonly events: EventRecorder,
    /** Told of each pod left with a dead mount, when pods are to be restarted (--restart-pods-not-healed-in-place). */
    private readonly restarts?: { restartNeeded(s: SidecarInfo, pv: PvInfo, pod: PodAnswer): void },
  ) {}

  outcome(o: HealOutcome): void {
    const { sidecar: s, pv } = o;
    this.logger.info("heal", {
      node: s.nodeId,
      driver: s.driver,
      sidecar: s.key,
      pv: pv.name,
      volume_id: pv.handle,
      trigger: o.trigger,
      mode: o.mode,
      result: o.result,
      health: o.health,
      attempt: o.attempt,
      duration: o.durationMs / 1000,
      ...(o.message ? { detail: o.message } : {}),
      ...(o.retryInMs !== undefined ? { retryInMs: o.retryInMs } : {}),
    });
    this.metrics.healSeconds.observe({ driver: s.driver, mode: o.mode }, o.durationMs / 1000);
    if (o.retryInMs !== undefined) return;
    this.metrics.heals.inc({ driver: s.driver, trigger: o.trigger, result: o.result });
    this.recordEvents(o);
    this.recordPods(o);
  }

  /** The sidecar's driver does not offer VolumeHealer (told once, until that changes): nothing of it is checked or healed. */
  notHealing(s: SidecarInfo, reason: string): void {
    this.logger.info("sidecar left alone", { sidecar: s.key, node: s.nodeId, driver: s.driver, reason });
    this.events.sidecar(
      s,
      "Normal",
      "DriverNotHealing",
      `${reason}: its volumes on node ${s.nodeId} are neither checked nor healed (the sidecar still serves the upstream services); asked again when the driver restarts`,
    );
  }

  /** A sidecar endpoint refused (told once per reason): a warning, a metric, an Event on its CSIAddonsNode. */
  endpointRefused(s: SidecarInfo, err: EndpointRefusedError): void {
    this.logger.warn("sidecar endpoint refused", {
      sidecar: s.key,
      node: s.nodeId,
      driver: s.driver,
      endpoint: s.endpoint,
      reason: err.kind,
      detail: err.message,
    });
    this.metrics.endpointsRefused.inc({ driver: s.driver, reason: err.kind });
    this.events.sidecar(s, "Warning", "SidecarEndpointRefused", err.message);
  }

  /**
   * What each pod sees after a heal that re-made the volume (HEALED): an Event on the pod (whole
   * again, or to be restarted), one on the claim naming the pods to restart, a log line and a
   * metric per pod. After any other answer nothing was re-made, and a pod's state is what it was.
   */
  private recordPods(o: HealOutcome): void {
    if (o.result !== "HEALED" || !o.pods?.length) return;
    const { sidecar: s, pv } = o;
    // A pod using the volume is in its claim's namespace: a sidecar naming another (a forged or
    // broken one) gets no Event written on it, nor an eviction asked for.
    const pods = o.pods.filter((p) => p.namespace === pv.claim?.namespace);
    if (pods.length < o.pods.length) {
      this.logger.warn("sidecar named pods outside the volume's claim namespace; ignored", {
        sidecar: s.key,
        node: s.nodeId,
        pv: pv.name,
        ignored: o.pods.length - pods.length,
      });
    }
    const restart: string[] = [];
    for (const p of pods) {
      this.metrics.podsAfterHeal.inc({ driver: s.driver, state: p.state });
      const fields = { node: s.nodeId, driver: s.driver, pv: pv.name, pod: `${p.namespace}/${p.name}`, pod_uid: p.uid, state: p.state, reason: p.reason };
      const detail = p.message ? `: ${p.message}` : "";
      if (p.state === "RESTART_NEEDED") {
        restart.push(`${p.namespace}/${p.name}`);
        this.logger.warn("pod must be restarted to see its healed volume", { ...fields, detail: p.message });
        this.events.pod(
          p,
          "Warning",
          "VolumeRestartNeeded",
          `volume ${pv.name} was healed by ${s.driver} on node ${s.nodeId}, but this pod still sees the dead mount; restart the pod${detail}`,
        );
        this.restarts?.restartNeeded(s, pv, p);
      } else if (p.state === "WHOLE_IN_PLACE") {
        this.logger.info("pod sees its healed volume", fields);
        this.events.pod(
          p,
          "Normal",
          "VolumeWholeInPlace",
          `volume ${pv.name} was healed by ${s.driver} on node ${s.nodeId}; this pod sees it working without a restart${detail}`,
        );
      } else {
        this.logger.info("pod not told about its healed volume", { ...fields, detail: p.message });
      }
    }
    if (restart.length) {
      this.events.volume(
        pv,
        "Warning",
        "PodsRestartNeeded",
        `healed on node ${s.nodeId}, but ${restart.length} pod(s) still see the dead mount until restarted: ${restart.join(", ")}`,
      );
    }
  }

  private recordEvents(o: HealOutcome): void {
    const where = `by ${o.sidecar.driver} on node ${o.sidecar.nodeId}`;
    const checked = o.mode === "IF_ABNORMAL";
    if ((checked && (o.result === "HEALED" || o.result === "NOT_HEALABLE")) || o.health === "ABNORMAL") {
      this.events.volume(o.pv, "Warning", "VolumeAbnormal", `health check found the volume broken on node ${o.sidecar.nodeId}`);
    }
    if (o.result === "HEALED") {
      // The message names no trigger, so every heal of this volume on this node aggregates into one Event.
      this.events.volume(o.pv, "Normal", "VolumeHealed", `volume healed ${where}`);
    } else if (o.result === "NOT_HEALABLE") {
      this.events.volume(o.pv, "Warning", "VolumeNotHealable", `${where}: ${o.message || "the driver cannot heal this volume"}`);
    } else if (o.result !== "NOT_NEEDED") {
      this.events.volume(o.pv, "Warning", "VolumeHealFailed", `${where}: ${o.result}${o.message ? `: ${o.message}` : ""}`);
    }
  }
}
