// How the sidecar reaches the API server: over TLS, one HTTP/2 connection for every request and
// watch (h2-connection.ts); HTTP/1.1 with a keep-alive agent for a plain-HTTP server or one that
// does not speak h2. JSON in and out, a deadline on each call (the endpoint and credentials: endpoint.ts).
// Replaces @kubernetes/client-node in the sidecar: importing that library alone cost ~80 MB of RSS
// and ~1.5 s of start-up, and it opened a new TLS connection per request (see the project notes).
import * as http from "node:http";
import * as https from "node:https";
import type { Readable } from "node:stream";
import { KubeError } from "./api.js";
import type { KubeEndpoint } from "./endpoint.js";
import { H2Connection, failure, type H2Options, type KubeResponse } from "../../common/kube/h2-connection.js";
import { readText, sendRequest } from "../../common/kube/request.js";

export interface TransportOptions extends Pick<H2Options, "pingEveryMs" | "pingTimeoutMs"> {
  /** Called once if the server turns out not to speak HTTP/2 and requests go over HTTP/1.1. */
  onHttp1?: (reason: string) => void;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- watch events carry objects of any kind; callers type what they read
export type WatchEvent = { type: string; object: Record<string, any> };

export class KubeTransport {
  private readonly agent: http.Agent;
  private readonly h2: H2Connection | undefined;
  private onHttp1: ((reason: string) => void) | undefined;

  constructor(
    private readonly ep: KubeEndpoint,
    opts: TransportOptions = {},
  ) {
    const tlsOptions = { ca: ep.ca, cert: ep.cert, key: ep.key, rejectUnauthorized: !ep.insecureSkipTlsVerify };
    const tls = ep.server.protocol === "https:";
    this.agent = tls ? new https.Agent({ keepAlive: true, ...tlsOptions }) : new http.Agent({ keepAlive: true });
    this.h2 = tls ? new H2Connection(ep.server, { tls: tlsOptions, pingEveryMs: opts.pingEveryMs, pingTimeoutMs: opts.pingTimeoutMs }) : undefined;
    this.onHttp1 = opts.onHttp1;
  }

  close(): void {
    this.h2?.close();
    this.agent.destroy();
  }

  /** One JSON request; a non-2xx answer becomes a KubeError with the Status's reason and message. */
  async request<T>(method: string, path: string, body: unknown, signal: AbortSignal): Promise<T> {
    const res = await this.send(method, path, body, signal);
    const text = await readAll(res.body, signal);
    if (res.status >= 200 && res.status < 300) return JSON.parse(text) as T;
    throw statusError(res.status, text);
  }

  /** Streams watch events until the server ends the stream or `signal` aborts. */
  async watch(path: string, signal: AbortSignal, onEvent: (e: WatchEvent) => void): Promise<void> {
    const { status, body: res } = await this.send("GET", path, undefined, signal);
    if (status !== 200) throw statusError(status, await readAll(res, signal));
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
    } catch (e) {
      // The caller stopping the watch is its normal end, not a failure.
      if (signal.aborted) return;
      throw e instanceof KubeError ? e : unreachable(e as Error);
    } finally {
      res.destroy();
    }
    await ended;
  }

  private async send(method: string, path: string, body: unknown, signal: AbortSignal): Promise<KubeResponse> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { accept: "application/json" };
    const token = this.ep.token();
    if (token) headers["authorization"] = `Bearer ${token}`;
    if (payload) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(payload.length);
    }
    const url = new URL(path, this.ep.server);
    const onHttp1 = (reason: string) => {
      this.onHttp1?.(reason);
      this.onHttp1 = undefined;
    };
    return sendRequest({ url, method, headers, payload, signal }, { h2: this.h2, http1: { agent: this.agent }, onHttp1 }).catch((e: Error) => {
      throw failed(e, signal);
    });
  }
}

/** The body as text; a stream that breaks is the API unreachable, or the caller's deadline. */
function readAll(res: Readable, signal: AbortSignal): Promise<string> {
  return readText(res).catch((e: Error) => {
    throw failed(e, signal);
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

const unreachable = (e: Error) => new KubeError(0, "Unavailable", `Kubernetes API unreachable: ${failure(e)}`);
const timeout = () => new KubeError(0, "Timeout", "request to the Kubernetes API timed out or was cancelled");
const failed = (e: Error, signal: AbortSignal) => (signal.aborted ? timeout() : unreachable(e));

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
