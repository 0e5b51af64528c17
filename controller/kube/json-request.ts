// One plain JSON request to the API server, for the one write every heal makes: its Event (two with
// a bound claim). client-node's generated path (node-fetch, ObjectSerializer both ways, an Observable
// middleware chain) measured 1.2–1.5 ms of controller CPU per Event; this one, on the same pooled
// HTTP/1.1 connection, 0.8–0.9 ms, and over HTTP/2 (one connection for every Event, as the
// sidecar's requests) less again (README, Stack notes). client-node still supplies everything
// about the cluster and the user — server, CA, client certificate, token (re-read as it rotates),
// proxy agent — through applyToHTTPSOptions, so the paths cannot disagree on credentials.
import http from "node:http";
import https from "node:https";
import type { Readable } from "node:stream";
import type { KubeConfig } from "@kubernetes/client-node";
import { failure, H2Refused } from "../../common/kube/h2-connection.js";
import { KubeRequestError } from "./api.js";
import type { KeepAliveAgents } from "./keep-alive.js";

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

interface Answer {
  status: number;
  text: string;
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
  const body = Buffer.from(JSON.stringify(r.body));
  const headers: Record<string, string> = {
    ...lowerCased(opts.headers),
    accept: "application/json",
    "content-type": r.contentType ?? "application/json",
    "content-length": String(body.length),
  };
  const { status, text } = await send(url, opts, agents, r, headers, body).catch((err: Error) => {
    // A stream cancelled because its connection failed: the connection's error says why.
    throw new KubeRequestError(0, `${r.what}: ${err.cause instanceof Error ? failure(err) : err.message}`);
  });
  if (status < 200 || status > 299) throw new KubeRequestError(status, `${r.what}: HTTP ${status}`);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new KubeRequestError(status, `${r.what}: the API server's answer is not JSON`);
  }
}

/** Over the shared HTTP/2 connection; over HTTP/1.1 where there is none or the server refused h2. */
async function send(url: URL, opts: https.RequestOptions, agents: KeepAliveAgents, r: JsonRequest, headers: Record<string, string>, body: Buffer): Promise<Answer> {
  const agent = opts.agent as http.Agent | undefined;
  const h2 = agents.http2(url, agent);
  if (h2) {
    try {
      const res = await h2.request(r.method, url.pathname + url.search, headers, body, r.signal);
      return { status: res.status, text: await readBody(res.body) };
    } catch (err) {
      if (!(err instanceof H2Refused)) throw err;
    }
  }
  return sendHttp1(url, { ...opts, agent: agents.share(agent), method: r.method, signal: r.signal, headers }, body);
}

function sendHttp1(url: URL, options: https.RequestOptions, body: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === "http:" ? http : https).request(url, options, (res) => {
      readBody(res).then((text) => resolve({ status: res.statusCode ?? 0, text }), reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

function readBody(body: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) body.destroy(new Error(`answer larger than ${MAX_BODY_BYTES} bytes`));
      else chunks.push(chunk);
    });
    body.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    body.on("error", reject);
  });
}

/** HTTP/2 wants header names in lower case; client-node's (Authorization) are not. */
function lowerCased(headers: http.OutgoingHttpHeaders | readonly string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!headers || Array.isArray(headers)) return out;
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) out[k.toLowerCase()] = String(v);
  return out;
}
