// A CSIAddonsNode's spec.driver.endpoint: `pod://<pod>.<namespace>:<port>` (what our sidecar and
// the upstream one publish) or a plain `host:port`.
export type Endpoint = { kind: "pod"; pod: string; namespace: string; port: number } | { kind: "address"; address: string };

export class EndpointError extends Error {}

export function parseEndpoint(text: string): Endpoint {
  const pod = /^pod:\/\/([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?):(\d{1,5})$/.exec(text);
  if (pod) return { kind: "pod", pod: pod[1]!, namespace: pod[3]!, port: Number(pod[5]) };
  if (/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(text)) return { kind: "address", address: text };
  throw new EndpointError(`endpoint ${JSON.stringify(text)} is neither pod://<pod>.<namespace>:<port> nor host:port`);
}
