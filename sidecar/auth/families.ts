// What a call on the controller port needs (DESIGN 4.6 and 9, "Least authority"), in one place: each gRPC
// service belongs to a family, and the SubjectAccessReview asks for `call` on the subresource of
// that family (csiaddonsnodes/heal, csiaddonsnodes/networkfence, ...), so a caller granted one family
// (our healer controller: heal) is refused the others. The identity pass-through is open to any
// caller that may call at least one family: every caller starts with GetIdentity/GetCapabilities,
// which change nothing, while a pod's or the sidecar's own token is still refused there (the
// upstream controller deletes the CSIAddonsNode of a sidecar that refuses it). Health and
// reflection never reach the middleware. A service not listed is refused.
export type Family = "heal" | "reclaimspace" | "encryptionkeyrotation" | "networkfence" | "replication" | "volumegroup";

export const FAMILY_OF_SERVICE: Readonly<Record<string, Family>> = {
  "sidecar.v1.VolumeHealer": "heal",
  "proto.ReclaimSpace": "reclaimspace",
  "proto.EncryptionKeyRotation": "encryptionkeyrotation",
  "proto.NetworkFence": "networkfence",
  "proto.Replication": "replication",
  "proto.VolumeGroupController": "volumegroup",
};

/** Every family, heal first (our controller's, one review), then the upstream controller's. */
export const FAMILIES: readonly Family[] = ["heal", "reclaimspace", "encryptionkeyrotation", "networkfence", "replication", "volumegroup"];

/** Services any caller holding one family may call. */
const AUTHENTICATED_ONLY = new Set(["identity.Identity"]);

/** The families the upstream csi-addons controller calls (components/upstream-controller-access). */
export const UPSTREAM_FAMILIES: readonly Family[] = ["reclaimspace", "encryptionkeyrotation", "networkfence", "replication", "volumegroup"];

export type Access = { kind: "authenticated" } | { kind: "family"; family: Family } | { kind: "unknown"; service: string };

/** `method` is the full path, /package.Service/Method. */
export function accessOf(method: string): Access {
  const service = method.split("/")[1] ?? "";
  if (AUTHENTICATED_ONLY.has(service)) return { kind: "authenticated" };
  const family = FAMILY_OF_SERVICE[service];
  return family ? { kind: "family", family } : { kind: "unknown", service };
}
