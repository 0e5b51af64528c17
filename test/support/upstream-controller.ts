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
import { installGrants } from "./deploy/grants.js";
import { loadRbacRules, sidecarServiceAccount, type RbacRules } from "./deploy/rbac.js";
import { NAMESPACE } from "./fixtures.js";
import { call, type Outcome } from "./grpc.js";
import { startSidecarProc, type SidecarProc } from "./sidecar.js";

/** The sidecar's own ServiceAccount, as the API server names it. */
export const SIDECAR_USER = `system:serviceaccount:${NAMESPACE}:${sidecarServiceAccount}`;

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

/**
 * The sidecar as deploy/ runs it, where the upstream controller would call it: as its own
 * ServiceAccount (`token`) holding exactly deploy/'s RBAC, with deploy/'s auth flags.
 */
export function startShippedSidecar(kube: KubeApi, token: string, driverSocket: string): Promise<SidecarProc> {
  return startSidecarProc({ driverSocket, kubeconfig: sidecarAccount(kube, token, loadRbacRules()), args: shippedAuthFlags() });
}

/** Makes `token` the sidecar's own ServiceAccount token (audience: the API server's), holding `rules`; returns a kubeconfig with it. */
export function sidecarAccount(kube: KubeApi, token: string, rules: RbacRules): string {
  kube.auth.addToken(token, {
    username: SIDECAR_USER,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${NAMESPACE}`],
    audiences: [KUBE_API_AUDIENCE],
  });
  installGrants(kube, [
    { user: SIDECAR_USER, rules: rules.namespaced, namespace: NAMESPACE },
    { user: SIDECAR_USER, rules: rules.cluster },
  ]);
  return kube.writeKubeconfig(token, SIDECAR_USER);
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
