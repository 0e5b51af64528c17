// DESIGN 7.2: when a sidecar's volumes must be healed, and how.
import type { Mode, Reason, SidecarInfo, Trigger } from "./types.js";

export const CREATED_BY_POD_UID = "sidecar.csiaddons.openshift.io/createdByPodUID";
export const DRIVER_RESTARTED_AT = "sidecar.csiaddons.openshift.io/driverRestartedAt";
export const DRIVER_RECONNECTED_AT = "sidecar.csiaddons.openshift.io/driverReconnectedAt";
export const HANDLED_RESTART = "healer.csiaddons.openshift.io/handledRestart";

/**
 * `<pod uid>+<driverRestartedAt>`, then `+<driverReconnectedAt>` once a driver without a boot id
 * reconnected. A new node-plugin pod and a restarted driver both lose every user-space mount (the
 * first two parts); a reconnection only may have (the third). Pod uids and RFC 3339 times in UTC
 * have no "+", and a marker without a reconnection is what it was before there were any.
 */
export function restartMarker(annotations: Readonly<Record<string, string>>): string {
  const base = `${annotations[CREATED_BY_POD_UID] ?? ""}+${annotations[DRIVER_RESTARTED_AT] ?? ""}`;
  const reconnected = annotations[DRIVER_RECONNECTED_AT];
  return reconnected === undefined ? base : `${base}+${reconnected}`;
}

/** The part of a marker that only a restart (new pod, new boot id) changes. */
const restartPart = (marker: string) => marker.split("+", 2).join("+");

export interface RestartDecision {
  trigger: Extract<Trigger, "restart" | "reconnect" | "first-sight">;
  mode: Mode;
  /** Written to HANDLED_RESTART once every volume has answered. */
  marker: string;
}

/** `--restart-heal-mode`: ALWAYS re-stages every volume after a restart; IF_ABNORMAL heals only those the driver finds broken. */
export type RestartHealMode = "always" | "if-abnormal";

/**
 * undefined when the marker was handled already (on the object, or `handledHere`: by this process,
 * whose marker a deletion of the object may have taken with it). No handled marker at all means the
 * controller has never seen this sidecar (just installed): its history is unknown, so check, do not
 * re-stage (the volumes an older node-plugin pod staged are told apart per volume: olderThanPod).
 * A reconnection alone (a driver without a boot id) is a check, never ALWAYS: nothing may have died.
 */
export function decideRestart(
  sidecar: Pick<SidecarInfo, "annotations" | "deleting">,
  restartMode: RestartHealMode = "always",
  handledHere?: string,
): RestartDecision | undefined {
  if (sidecar.deleting) return undefined;
  const marker = restartMarker(sidecar.annotations);
  const handled = sidecar.annotations[HANDLED_RESTART] ?? handledHere;
  if (handled === marker || handledHere === marker) return undefined;
  if (handled === undefined) return { trigger: "first-sight", mode: "IF_ABNORMAL", marker };
  if (restartPart(handled) === restartPart(marker)) return { trigger: "reconnect", mode: "IF_ABNORMAL", marker };
  return { trigger: "restart", mode: restartMode === "always" ? "ALWAYS" : "IF_ABNORMAL", marker };
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

/** A heal's reason, from what started it: a check-first heal heals only what its check found broken. */
export function reasonOf(trigger: Trigger, mode: Mode): Reason {
  if (mode === "IF_ABNORMAL") return "VOLUME_ABNORMAL";
  return trigger === "manual" ? "OPERATOR_REQUEST" : "DRIVER_RESTARTED";
}
