// The upstream csi-addons controller's connect, exactly as internal/connection and
// internal/kubernetes/token in csi-addons/kubernetes-csi-addons do it: TLS without verifying the
// server (InsecureSkipVerify), a unary interceptor that appends "authorization: Bearer <token>"
// (its own ServiceAccount token, read from the pod's token file) to every call, and
// identity.GetCapabilities as the first call of every new connection.
import * as grpc from "@grpc/grpc-js";
import { IdentityClient, type GetCapabilitiesResponse } from "../../proto/gen/identity/identity.js";
import { call, type Outcome } from "./grpc.js";

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
