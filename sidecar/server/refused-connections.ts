// Connections the TLS port refuses before any call exists: a plaintext client, a failed TLS
// handshake (e.g. a caller that does not trust our certificate). grpc-js (1.14) creates its
// http2.Http2SecureServer internally and exposes neither it nor its `tlsClientError` event; the
// servers live in the private `http2Servers` map of grpc.Server, which is where we listen. If a
// grpc-js upgrade moves them, the sidecar says so at start (and test/integration/sidecar/refused.test.ts fails).
import type { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import type * as grpc from "@grpc/grpc-js";

export type ConnectionRefusal = "plaintext" | "tls_handshake";

/** OpenSSL's answers to bytes that are not a TLS record: someone spoke plaintext (gRPC or HTTP/1). */
const PLAINTEXT = new Set(["ERR_SSL_WRONG_VERSION_NUMBER", "ERR_SSL_HTTP_REQUEST", "ERR_SSL_HTTPS_PROXY_REQUEST"]);

/** Calls `onRefused` for each refused connection; false when grpc-js offered no TLS server to watch. */
export function watchRefusedConnections(server: grpc.Server, onRefused: (reason: ConnectionRefusal, peer: string, error: string) => void): boolean {
  const servers = (server as unknown as { http2Servers?: Map<EventEmitter, unknown> }).http2Servers;
  let watched = false;
  for (const http2 of servers?.keys() ?? []) {
    if (typeof (http2 as { setSecureContext?: unknown }).setSecureContext !== "function") continue;
    watched = true;
    // The TLS socket has lost its address by the time the handshake fails; the TCP socket had it.
    const peers = new WeakMap<Socket, string>();
    http2.prependListener("connection", (raw: Socket) => peers.set(raw, `${raw.remoteAddress}:${raw.remotePort}`));
    http2.on("tlsClientError", (err: NodeJS.ErrnoException & { reason?: string }, tls: Socket & { _parent?: Socket }) => {
      const raw = tls._parent ?? tls;
      // Connected and closed without a byte: a TCP probe or a port scan, not a refused client.
      if (raw.bytesRead === 0) return;
      const reason = PLAINTEXT.has(err.code ?? "") ? "plaintext" : "tls_handshake";
      onRefused(reason, peers.get(raw) ?? `${raw.remoteAddress}:${raw.remotePort}`, `${err.code ?? "error"}: ${err.reason ?? firstLine(err.message)}`);
    });
  }
  return watched;
}

function firstLine(text: string): string {
  return text.split("\n")[0]!.trim();
}
