// The upstream csi-addons controller's connect, exactly as internal/connection and
// internal/kubernetes/token in csi-addons/kubernetes-csi-addons do it: TLS without verifying the
// server (InsecureSkipVerify), a unary interceptor that appends "authorization: Bearer <token>"
// (its own ServiceAccount token, read from the pod's token file) to every call, and
// identity.GetCapabilities as the first call of every new connection.
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { IdentityClient, type GetCapabilitiesResponse } from "../../proto/gen/identity/identity.js";
import { KUBE_API_AUDIENCE, type KubeApi } from "../kube/index.js";
import { findOne, loadManifests } from "./deploy/load.js";
import { call, type Outcome } from "./grpc.js";

/** The upstream controller's ServiceAccount, as the API server names it. */
export const UPSTREAM_USER = "system:serviceaccount:csi-addons-system:csi-addons-controller-manager";

/** Makes `token` the upstream controller's own ServiceAccount token (audience: the API server's). */
export function addUpstreamToken(kube: KubeApi, token: string): void {
  kube.auth.addToken(token, {
    username: UPSTREAM_USER,
    groups: ["system:serviceaccounts", "system:serviceaccounts:csi-addons-system"],
    audiences: [KUBE_API_AUDIENCE],
  });
}

/** The flags of deploy/'s sidecar container that decide who may call (--enable-auth, --auth-*). */
export function shippedAuthFlags(): string[] {
  const ds = findOne(loadManifests(), "DaemonSet") as unknown as { spec: { template: { spec: { containers: { name: string; args?: string[] }[] } } } };
  const sidecar = ds.spec.template.spec.containers.find((c) => c.name === "csi-addons-healer");
  assert.ok(sidecar, "deploy/'s DaemonSet has no csi-addons-healer container");
  return (sidecar.args ?? []).filter((a) => /^--(enable-auth|auth-)/.test(a));
}

function serviceAccountToken(token: string): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.add("authorization", `Bearer ${token}`);
        next(metadata, listener);
      },
    });
}

/** A fresh connection and its first call, GetCapabilities (the controller's timeout: one minute). */
export async function upstreamConnect(address: string, token: string, timeoutMs = 60_000): Promise<Outcome<GetCapabilitiesResponse>> {
  const insecureSkipVerify = grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false });
  const client = new IdentityClient(address, insecureSkipVerify, { interceptors: [serviceAccountToken(token)] });
  try {
    return await call(client, client.getCapabilities, {}, { deadlineMs: timeoutMs });
  } finally {
    client.close();
  }
}
