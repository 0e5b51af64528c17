// DESIGN 7.2: when a sidecar's volumes must be healed, and how.
import type { Mode, SidecarInfo, Trigger } from "./types.js";

export const CREATED_BY_POD_UID = "sidecar.csiaddons.openshift.io/createdByPodUID";
export const DRIVER_RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";
export const HANDLED_RESTART = "healer.csiaddons.openshift.io/handledRestart";

/** A new node-plugin pod and a restarted driver container both lose every user-space mount. */
export function restartMarker(annotations: Readonly<Record<string, string>>): string {
  return `${annotations[CREATED_BY_POD_UID] ?? ""}+${annotations[DRIVER_RESTARTED_AT] ?? ""}`;
}

export interface RestartDecision {
  trigger: Extract<Trigger, "restart" | "first-sight">;
  mode: Mode;
  /** Written to HANDLED_RESTART once every volume has answered. */
  marker: string;
}

/**
 * undefined when the marker was handled already. No handled marker at all means the controller
 * has never seen this sidecar (just installed): its history is unknown, so check, do not re-stage.
 */
export function decideRestart(sidecar: Pick<SidecarInfo, "annotations" | "deleting">): RestartDecision | undefined {
  if (sidecar.deleting) return undefined;
  const marker = restartMarker(sidecar.annotations);
  const handled = sidecar.annotations[HANDLED_RESTART];
  if (handled === marker) return undefined;
  if (handled === undefined) return { trigger: "first-sight", mode: "IF_ABNORMAL", marker };
  return { trigger: "restart", mode: "ALWAYS", marker };
}

/** When the restart happened, for the restart-to-healed metric: driverRestartedAt if it is what changed. */
export function restartTime(annotations: Readonly<Record<string, string>>, previousMarker: string | undefined, seenAt: number): number {
  const at = annotations[DRIVER_RESTARTED_AT];
  const podUid = annotations[CREATED_BY_POD_UID] ?? "";
  const samePod = previousMarker !== undefined && previousMarker.startsWith(`${podUid}+`);
  const parsed = at === undefined ? NaN : Date.parse(at);
  return samePod && Number.isFinite(parsed) && parsed <= seenAt ? parsed : seenAt;
}

/** The one capability a mode needs (health checks only for IF_ABNORMAL). */
export function canRun(mode: Mode, caps: { healVolume: boolean; getVolumeHealth: boolean }): boolean {
  return caps.healVolume && (mode === "ALWAYS" || caps.getVolumeHealth);
}
