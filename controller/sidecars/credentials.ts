// How the controller reaches the sidecars (DESIGN 7.3): TLS verified against --sidecar-ca-file
// under --sidecar-tls-server-name; no verification only with the explicit skip flag; plaintext
// only with --sidecar-tls=false.
import { readFileSync } from "node:fs";
import type { SidecarTls } from "../config/config.js";

export interface ChannelSetup {
  /** Absent: plaintext. */
  tls?: {
    /** The CA bundle the sidecars' certificates must chain to; absent only when not verifying. */
    ca: Buffer | undefined;
    /** The name the certificate must carry (and SNI, and :authority); else the address's host. */
    serverName: string | undefined;
    verify: boolean;
  };
}

export function channelSetup(tls: SidecarTls): ChannelSetup {
  if (!tls.enabled) return {};
  if (tls.insecureSkipVerify) return { tls: { ca: undefined, serverName: tls.serverName, verify: false } };
  return { tls: { ca: readFileSync(tls.caFile!), serverName: tls.serverName, verify: true } };
}
