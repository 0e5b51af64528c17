// CSIAddonsNode naming, identical to the upstream sidecar's so both find the same object.
import { createHash } from "node:crypto";

const MAX_NAME = 253;

export function csiAddonsNodeName(nodeId: string, namespace: string, ownerKind: string, ownerName: string): string {
  // Lowercased before it is hashed too, as upstream does: both sidecars must name a long object alike.
  const kind = ownerKind.toLowerCase();
  const base = `${nodeId}-${namespace}-${kind}-${ownerName}`;
  if (base.length <= MAX_NAME) return base;
  const hash = createHash("sha256")
    .update(nodeId + namespace + kind + ownerName)
    .digest("hex")
    .slice(0, 16);
  return `${base.slice(0, MAX_NAME - 16 - 3)}-${hash}`;
}

export function podEndpoint(pod: string, namespace: string, port: number): string {
  return `pod://${pod}.${namespace}:${port}`;
}
