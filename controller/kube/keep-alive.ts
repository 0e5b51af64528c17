// client-node 1.x builds a new, non-keep-alive https.Agent for every request (KubeConfig
// applySecurityAuthentication), so each Event or patch paid a fresh TCP and TLS handshake: a
// third of the controller's CPU in a 500-volume restart heal. Requests keep client-node's own
// TLS material; they only share one keep-alive agent built from it, and the Event writes one
// HTTP/2 connection (common/kube/h2-connection.ts), as the sidecar's requests do.
import { createHash } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { H2Connection } from "../../common/kube/h2-connection.js";

/** Idle pooled connections are closed after this; the API server closes its own idle ones too. */
const IDLE_SOCKET_MS = 30_000;

interface Pool {
  key: string;
  agent: http.Agent;
  /** Made on first use, for an https server. */
  h2?: { origin: string; connection: H2Connection };
}

const TLS_OPTIONS = ["ca", "cert", "key", "pfx", "passphrase", "rejectUnauthorized", "servername"] as const;

/**
 * Hands out one keep-alive agent per set of TLS options. A changed CA or client certificate (read
 * again by client-node on every request) gets a new agent; the old one's idle sockets are closed.
 * Proxy agents (hpagent, socks) are returned unchanged: they pool on their own terms.
 */
export class KeepAliveAgents {
  private pool: Pool | undefined;

  share(agent: http.Agent | undefined): http.Agent | undefined {
    return this.pooled(agent)?.agent ?? agent;
  }

  /**
   * Where a request to `url` with client-node's per-request agent goes: the pooled keep-alive agent
   * (share()), and for an https server not behind a proxy the HTTP/2 connection for the same TLS
   * options, which the request tries first.
   */
  route(url: URL, agent: http.Agent | undefined): { agent: http.Agent | undefined; h2?: H2Connection } {
    const pool = this.pooled(agent);
    if (!pool) return { agent };
    if (url.protocol !== "https:") return { agent: pool.agent };
    if (pool.h2?.origin !== url.origin) {
      pool.h2?.connection.retire();
      const tls = pick((agent as http.Agent & { options?: Record<string, unknown> }).options ?? {});
      pool.h2 = { origin: url.origin, connection: new H2Connection(url, { tls: { ...tls, rejectUnauthorized: tls["rejectUnauthorized"] !== false } }) };
    }
    return { agent: pool.agent, h2: pool.h2.connection };
  }

  close(): void {
    this.pool?.agent.destroy();
    this.pool?.h2?.connection.close();
    this.pool = undefined;
  }

  /** The pool for these TLS options (a new one when they changed); undefined for a proxy agent or none. */
  private pooled(agent: http.Agent | undefined): Pool | undefined {
    if (!agent || (agent.constructor !== https.Agent && agent.constructor !== http.Agent)) return undefined;
    const options = (agent as http.Agent & { options?: Record<string, unknown> }).options ?? {};
    const key = fingerprint(agent instanceof https.Agent ? "https" : "http", options);
    if (this.pool?.key !== key) {
      if (this.pool) retire(this.pool);
      const shared = { ...pick(options), keepAlive: true, timeout: IDLE_SOCKET_MS };
      this.pool = { key, agent: agent instanceof https.Agent ? new https.Agent(shared) : new http.Agent(shared) };
    }
    // The per-request agent was never used: nothing to close, but do not let it linger in a pool.
    agent.destroy();
    return this.pool;
  }
}

/** Requests still running on a replaced pool finish; its connections close afterwards. */
function retire({ agent, h2 }: Pool): void {
  (agent as http.Agent & { keepAlive: boolean }).keepAlive = false;
  for (const sockets of Object.values(agent.freeSockets)) for (const s of sockets ?? []) s.destroy();
  h2?.connection.retire();
}

function pick(options: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of TLS_OPTIONS) if (options[k] !== undefined) out[k] = options[k];
  return out;
}

/** A digest, so that no key material is kept as a map key or compared as text. */
function fingerprint(scheme: string, options: Record<string, unknown>): string {
  const h = createHash("sha256").update(scheme);
  for (const k of TLS_OPTIONS) {
    const v = options[k];
    h.update(`\0${k}=`);
    for (const part of Array.isArray(v) ? v : v === undefined ? [] : [v]) h.update(Buffer.isBuffer(part) ? part : `${String(part)}\0`);
  }
  return h.digest("hex");
}
