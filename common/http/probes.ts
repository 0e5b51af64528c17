// /healthz (alive and the event loop answers), /readyz (the program's readiness), /metrics.
import { createServer, type Server } from "node:http";
import type { Registry } from "prom-client";

/** What /readyz reports: the program's own notion of ready, and why not. */
export interface Readiness {
  readonly ready: boolean;
  reason(): string;
}

export function startHttpServer(endpoint: { host: string; port: number }, readiness: Readiness, registry: Registry): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405).end();
      return;
    }
    if (path === "/healthz") {
      // Answering at all proves the event loop is responsive.
      res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    } else if (path === "/readyz") {
      res.writeHead(readiness.ready ? 200 : 503, { "content-type": "text/plain" }).end(`${readiness.reason()}\n`);
    } else if (path === "/metrics") {
      registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(endpoint.port, endpoint.host, () => {
      server.off("error", reject);
      resolve(server);
    });
  });
}
