// One request to the API server, as both programs send it: over the HTTP/2 connection when there
// is one and the server speaks h2, else over HTTP/1.1 with the caller's agent. Errors are left raw:
// each program says in its own terms what a failure means (the sidecar a KubeError, the controller
// a KubeRequestError).
import * as http from "node:http";
import * as https from "node:https";
import type { Readable } from "node:stream";
import { H2Refused, type H2Connection, type KubeResponse } from "./h2-connection.js";

export interface ApiRequest {
  url: URL;
  method: string;
  /** Lower case: HTTP/2 wants them so. */
  headers: Record<string, string>;
  payload?: Buffer;
  signal: AbortSignal;
}

export interface Route {
  h2?: H2Connection;
  /** HTTP/1.1 request options (the agent, client-node's TLS material). */
  http1: https.RequestOptions;
  /** Told when the server refused h2 and this request went over HTTP/1.1 instead. */
  onHttp1?: (reason: string) => void;
}

export async function sendRequest(r: ApiRequest, via: Route): Promise<KubeResponse> {
  if (via.h2 && !via.h2.refused) {
    try {
      return await via.h2.request(r.method, r.url.pathname + r.url.search, r.headers, r.payload, r.signal);
    } catch (e) {
      if (!(e instanceof H2Refused)) throw e;
      via.onHttp1?.(e.message);
    }
  }
  return new Promise((resolve, reject) => {
    const mod = r.url.protocol === "http:" ? http : https;
    const req = mod.request(r.url, { ...via.http1, method: r.method, headers: r.headers, signal: r.signal }, (res) =>
      resolve({ status: res.statusCode ?? 0, body: res }),
    );
    req.once("error", reject);
    req.end(r.payload);
  });
}

/** The whole body as text; an error past `maxBytes` (when given) rather than holding more. */
export function readText(body: Readable, maxBytes = Infinity): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) body.destroy(new Error(`answer larger than ${maxBytes} bytes`));
      else chunks.push(chunk);
    });
    body.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    body.once("error", reject);
  });
}
