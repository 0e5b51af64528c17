// How the demo words what it sees: capabilities, health, and objects of kinds the API may not serve.
import { Capability } from "../../proto/gen/identity/identity.js";
import { volumeHealth_StateToJSON as stateName, type VolumeHealth } from "../../proto/gen/healer/v1/healer.js";
import type { KubeApi } from "../kube/index.js";

/** "VolumeHealer HEAL_VOLUME" from { volumeHealer: { type: "HEAL_VOLUME" } }. */
export const capabilityName = (c: Capability) =>
  Object.entries(Capability.toJSON(c) as Record<string, { type?: string }>)
    .map(([kind, v]) => `${kind[0]!.toUpperCase()}${kind.slice(1)} ${v.type ?? "UNKNOWN"}`)
    .join(" ") || "(empty)";
export const healthText = (h: VolumeHealth | undefined) => (h ? `${stateName(h.state)}${h.reason ? ` (${h.reason})` : ""}` : "(no health in the answer)");

/** Objects of a kind the API may not serve (events.k8s.io is newer than core Events). */
export function listIfServed(kube: KubeApi, apiVersion: string, kind: string): object[] {
  try {
    return kube.list(apiVersion, kind);
  } catch {
    return [];
  }
}
