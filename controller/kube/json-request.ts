// One plain JSON request to the API server, for the one write every heal makes: its Event (two with
// a bound claim). client-node's generated path (node-fetch, ObjectSerializer both ways, an Observable
// middleware chain) measured 1.2–1.5 ms of controller CPU per Event; this one, on the same pooled
// HTTP/1.1 connection, 0.8–0.9 ms, and over HTTP/2 (one connection for every Event, as the
// sidecar's requests) less again (docs/decisions/controller-events-plain-json.md). client-node still supplies everything
// about the cluster and the user — server, CA, client certificate, token (re-read as it rotates),
// proxy agent — through applyToHTTPSOptions, so the paths cannot disagree on credentials.
import type http from "node:http";
import type https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import { failure } from "../../common/kube/h2-connection.js";
import { readText, sendRequest } from "../../common/kube/request.js";
import { KubeRequestError } from "./api.js";
import type { KeepAliveAgents } from "./keep-alive.js";
import { httpStatusText } from "./status-text.js";

/** A response body larger than this is not an Event or a Status: refuse it rather than hold it. */
const MAX_BODY_BYTES = 1 << 20;

export interface JsonRequest {
  /** Names the request in errors, e.g. "create Event in default". */
  what: string;
  method: "POST" | "PATCH";
  /** From the server's root, e.g. /api/v1/namespaces/default/events. */
  path: string;
  body: unknown;
  contentType?: string;
  signal: AbortSignal;
}

/** The parsed answer; KubeRequestError with the HTTP status (0 when none came back) otherwise. */
export async function jsonRequest<T>(kc: KubeConfig, agents: KeepAliveAgents, r: JsonRequest): Promise<T> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new KubeRequestError(0, `${r.what}: the kubeconfig names no cluster server`);
  const opts: https.RequestOptions = {};
  try {
    await kc.applyToHTTPSOptions(opts);
  } catch (err) {
    throw new KubeRequestError(0, `${r.what}: ${(err as Error).message}`);
  }
  const url = new URL(r.path, server);
  const payload = Buffer.from(JSON.stringify(r.body));
  const headers: Record<string, string> = {
    ...lowerCased(opts.headers),
    accept: "application/json",
    "content-type": r.contentType ?? "application/json",
    "content-length": String(payload.length),
  };
  const { agent, h2 } = agents.route(url, opts.agent as http.Agent | undefined);
  const answer = sendRequest({ url, method: r.method, headers, payload, signal: r.signal }, { h2, http1: { ...opts, agent } }).then(async (res) => ({
    status: res.status,
    text: await readText(res.body, MAX_BODY_BYTES),
  }));
  const { status, text } = await answer.catch((err: Error) => {
    // A stream cancelled because its connection failed: the connection's error says why.
    throw new KubeRequestError(0, `${r.what}: ${err.cause instanceof Error ? failure(err) : err.message}`);
  });
  if (status < 200 || status > 299) throw new KubeRequestError(status, `${r.what}: ${httpStatusText(status, text)}`);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new KubeRequestError(status, `${r.what}: the API server's answer is not JSON`);
  }
}

/** HTTP/2 wants header names in lower case; client-node's (Authorization) are not. */
function lowerCased(headers: http.OutgoingHttpHeaders | readonly string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!headers || Array.isArray(headers)) return out;
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) out[k.toLowerCase()] = String(v);
  return out;
}
