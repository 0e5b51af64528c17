// CSIAddonsNode naming, identical to the upstream sidecar's so both find the same object.
import { createHash } from "node:crypto";

const MAX_NAME = 253;

export function csiAddonsNodeName(nodeId: string, namespace: string, ownerKind: string, ownerName: string): string {
  const base = `${nodeId}-${namespace}-${ownerKind.toLowerCase()}-${ownerName}`;
  if (base.length <= MAX_NAME) return base;
  const hash = createHash("sha256").update(nodeId + namespace + ownerKind + ownerName).digest("hex").slice(0, 16);
  return `${base.slice(0, MAX_NAME - 16 - 3)}-${hash}`;
}

export function podEndpoint(pod: string, namespace: string, port: number): string {
  return `pod://${pod}.${namespace}:${port}`;
}
