// A stand-in for the API server that answers every request with what the test says (one status,
// one body), over plain HTTP, and the sidecar's transport to it; both are closed after the test.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";
import { KubeTransport } from "../../sidecar/kube/transport.js";

export async function answeringApi(t: TestContext, answer: () => { status: number; body: string }): Promise<KubeTransport> {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const { status, body } = answer();
      res.writeHead(status, { "content-type": "application/json" });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  const transport = new KubeTransport({ server: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`), token: () => "sidecar" });
  t.after(() => transport.close());
  return transport;
}
