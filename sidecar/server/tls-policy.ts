// Applies the TLS version, cipher and curve policy (--tls-min-version, --tls-cipher-suites,
// --tls-curve-preferences) to grpc-js server credentials. grpc-js builds every secure context,
// the first and each one after a certificate reload, from the options its credentials publish
// through updateSecureContextOptions; the policy is merged into each, so a reload never drops it.
import type * as grpc from "@grpc/grpc-js";
import type { SecureContextOptions } from "node:tls";
import type { TlsPolicy } from "../config/upstream.js";

type Publisher = { updateSecureContextOptions?: (options: SecureContextOptions | null) => void };

export function applyTlsPolicy(credentials: grpc.ServerCredentials, policy: TlsPolicy): grpc.ServerCredentials {
  const target = credentials as unknown as Publisher;
  const publish = target.updateSecureContextOptions;
  // A grpc-js that no longer publishes this way would silently serve without the policy: refuse.
  if (typeof publish !== "function") throw new Error("this grpc-js cannot apply a TLS policy (no updateSecureContextOptions)");
  target.updateSecureContextOptions = (options) => publish.call(credentials, options && { ...options, ...policy });
  return credentials;
}
