// How the sidecar reaches the API server: one keep-alive HTTPS agent for every request and watch,
// JSON in and out, a deadline on each call (the endpoint and credentials: endpoint.ts).
// Replaces @kubernetes/client-node in the sidecar: importing that library alone cost ~80 MB of RSS
// and ~1.5 s of start-up, and it opened a new TLS connection per request (see the project notes).
import * as http from "node:http";
import * as https from "node:https";
import type { Readable } from "node:stream";
import { KubeError } from "./api.js";
import type { KubeEndpoint } from "./endpoint.js";

export type WatchEvent = { type: string; object: Record<string, any> };

export class KubeTransport {
  private readonly agent: http.Agent;

  constructor(private readonly ep: KubeEndpoint) {
    const tls = ep.server.protocol === "https:";
    this.agent = tls
      ? new https.Agent({ keepAlive: true, ca: ep.ca, cert: ep.cert, key: ep.key, rejectUnauthorized: !ep.insecureSkipTlsVerify })
      : new http.Agent({ keepAlive: true });
  }

  close(): void {
    this.agent.destroy();
  }

  /** One JSON request; a non-2xx answer becomes a KubeError with the Status's reason and message. */
  async request<T>(method: string, path: string, body: unknown, signal: AbortSignal): Promise<T> {
    const res = await this.send(method, path, body, signal);
    const text = await readAll(res, signal);
    if (res.statusCode! >= 200 && res.statusCode! < 300) return JSON.parse(text) as T;
    throw statusError(res.statusCode!, text);
  }

  /** Streams watch events until the server ends the stream or `signal` aborts. */
  async watch(path: string, signal: AbortSignal, onEvent: (e: WatchEvent) => void): Promise<void> {
    const res = await this.send("GET", path, undefined, signal);
    if (res.statusCode !== 200) throw statusError(res.statusCode!, await readAll(res, signal));
    const ended = new Promise<void>((resolveEnd, reject) => {
      res.once("error", (e) => (signal.aborted ? resolveEnd() : reject(unreachable(e))));
      res.once("close", () => resolveEnd());
    });
    ended.catch(() => {}); // awaited below; an error after an ERROR event must not go unhandled
    try {
      for await (const line of linesOf(res)) {
        if (!line.trim()) continue;
        const event = JSON.parse(line) as WatchEvent;
        if (event.type === "ERROR") throw statusError(Number(event.object?.["code"]) || 500, JSON.stringify(event.object));
        onEvent(event);
      }
    } finally {
      res.destroy();
    }
    await ended;
  }

  private send(method: string, path: string, body: unknown, signal: AbortSignal): Promise<http.IncomingMessage> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { accept: "application/json" };
    const token = this.ep.token();
    if (token) headers["authorization"] = `Bearer ${token}`;
    if (payload) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(payload.length);
    }
    const url = new URL(path, this.ep.server);
    const mod = url.protocol === "https:" ? https : http;
    return new Promise((resolveRes, reject) => {
      const req = mod.request(url, { method, headers, agent: this.agent, signal }, resolveRes);
      req.once("error", (e) => reject(signal.aborted ? timeout() : unreachable(e)));
      req.end(payload);
    });
  }
}

function readAll(res: http.IncomingMessage, signal: AbortSignal): Promise<string> {
  return new Promise((resolveText, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.once("end", () => resolveText(Buffer.concat(chunks).toString("utf8")));
    res.once("error", (e) => reject(signal.aborted ? timeout() : unreachable(e)));
  });
}

function statusError(code: number, text: string): KubeError {
  try {
    const st = JSON.parse(text) as { reason?: string; message?: string };
    return new KubeError(code, st.reason ?? "", st.message ?? `HTTP ${code}`);
  } catch {
    // Not a Status object (a proxy's error page): keep the HTTP code only.
    return new KubeError(code, "", `HTTP ${code}`);
  }
}

const unreachable = (e: Error & { code?: string }) => new KubeError(0, "Unavailable", `Kubernetes API unreachable: ${e.code ?? e.message}`);
const timeout = () => new KubeError(0, "Timeout", "request to the Kubernetes API timed out or was cancelled");

/**
 * The lines of a watch stream (newline-delimited JSON). Not node:readline: loading it brings the
 * REPL's history and keypress modules into a process that never reads a terminal.
 */
export async function* linesOf(res: Readable): AsyncGenerator<string> {
  res.setEncoding("utf8"); // a character split between chunks is decoded whole
  let rest = "";
  for await (const chunk of res as AsyncIterable<string>) {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop()!;
    yield* lines;
  }
  if (rest) yield rest;
}
