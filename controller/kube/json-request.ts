// One plain JSON request to the API server, for the one write every heal makes: its Event (two with
// a bound claim). client-node's generated path (node-fetch, ObjectSerializer both ways, an Observable
// middleware chain) measured 1.2–1.5 ms of controller CPU per Event; this one, on the same pooled
// connection, 0.8–0.9 ms (README, Stack notes). client-node still supplies everything about the
// cluster and the user — server, CA, client certificate, token (re-read as it rotates), proxy
// agent — through applyToHTTPSOptions, so the two paths cannot disagree on credentials.
import http from "node:http";
import https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
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
  const body = JSON.stringify(r.body);
  const { status, text } = await send(url, {
    ...opts,
    agent: agents.share(opts.agent as http.Agent | undefined),
    method: r.method,
    signal: r.signal,
    headers: {
      ...opts.headers,
      Accept: "application/json",
      "Content-Type": r.contentType ?? "application/json",
      "Content-Length": Buffer.byteLength(body),
    },
  }, body).catch((err: Error) => {
    throw new KubeRequestError(0, `${r.what}: ${err.message}`);
  });
  if (status < 200 || status > 299) throw new KubeRequestError(status, `${r.what}: HTTP ${status}`);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new KubeRequestError(status, `${r.what}: the API server's answer is not JSON`);
  }
}

function send(url: URL, options: https.RequestOptions, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === "http:" ? http : https).request(url, options, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) req.destroy(new Error(`answer larger than ${MAX_BODY_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}
