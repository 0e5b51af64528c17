// Channel credentials for the sidecars (DESIGN 7.3): TLS verified against --sidecar-ca-file with
// --sidecar-tls-server-name; no verification only with the explicit skip flag; plaintext only
// with --sidecar-tls=false.
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import type { SidecarTls } from "../config/config.js";

export interface ChannelSetup {
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
}

export function channelSetup(tls: SidecarTls): ChannelSetup {
  if (!tls.enabled) return { credentials: grpc.credentials.createInsecure(), options: {} };
  const options: grpc.ChannelOptions = tls.serverName ? { "grpc.ssl_target_name_override": tls.serverName, "grpc.default_authority": tls.serverName } : {};
  if (tls.insecureSkipVerify) {
    return { credentials: grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false }), options };
  }
  return { credentials: grpc.credentials.createSsl(readFileSync(tls.caFile!)), options };
}
