// "::" is a dual-stack socket on Linux: IPv6 and IPv4 (as ::ffff:a.b.c.d) on one port. A node
// booted with IPv6 disabled cannot create it, so there "every address" falls back to 0.0.0.0.
import { networkInterfaces } from "node:os";
import { ANY_ADDRESS } from "../config/values.js";

export function listenHost(host: string, interfaces = networkInterfaces()): string {
  if (host !== ANY_ADDRESS) return host;
  const ipv6 = Object.values(interfaces).some((addrs) => addrs?.some((a) => a.family === "IPv6"));
  return ipv6 ? ANY_ADDRESS : "0.0.0.0";
}

/** host:port for grpc-js, with an IPv6 literal in brackets. */
export function hostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}
