// How the controller reaches the sidecars (DESIGN 7.3): TLS verified against --sidecar-ca-file
// under --sidecar-tls-server-name; no verification only with the explicit skip flag; plaintext
// only with --sidecar-tls=false. The CA bundle is read again when its file changes (a rotated CA
// is picked up by the next connection, without a restart); connections already open keep theirs.
import type { SidecarTls } from "../config/config.js";
import { ChangingFile } from "./changing-file.js";

export interface ChannelSetup {
  /** Absent: plaintext. */
  tls?: {
    /** The CA bundle the sidecars' certificates must chain to, as it is now; absent only when not verifying. */
    ca: () => Buffer | undefined;
    /** The name the certificate must carry (and SNI, and :authority); else the address's host. */
    serverName: string | undefined;
    verify: boolean;
  };
}

export function channelSetup(tls: SidecarTls): ChannelSetup {
  if (!tls.enabled) return {};
  if (tls.insecureSkipVerify) return { tls: { ca: () => undefined, serverName: tls.serverName, verify: false } };
  const ca = new ChangingFile(tls.caFile!, "--sidecar-ca-file");
  // Read once now: a CA file that cannot be read is a start-up error, not a failure at the first call.
  ca.read();
  return { tls: { ca: () => ca.read(), serverName: tls.serverName, verify: true } };
}
