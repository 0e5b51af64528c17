// One Node hop and nothing else: an HTTP/2 server on 127.0.0.1 that forwards every
// stream byte for byte to the driver's unix socket over one HTTP/2 connection. No gRPC library, no
// protobuf, no Kubernetes, no auth, no limits, no logs, no metrics: what any Node sidecar pays
// before it does anything a sidecar must. The bench runs it beside the sidecar (relays.ts) so that
// the relay targets can be read against it. It imports nothing but Node's own modules, so its
// memory is Node's and nothing else's; relays.ts runs a JavaScript copy with the types stripped.
//   node test/bench/bare-relay.ts <driver socket>   prints its port on stdout
import * as http2 from "node:http2";
import * as net from "node:net";
// A sidecar talks TLS to the API server and to its callers: its process holds TLS whatever else it does.
import "node:tls";

const socketPath = process.argv[2];
if (!socketPath) {
  process.stderr.write("usage: node test/bench/bare-relay.ts <driver socket>\n");
  process.exit(2);
}
const upstream = http2.connect("http://localhost", { createConnection: () => net.connect(socketPath) });
upstream.on("error", (err) => {
  process.stderr.write(`bare relay: driver connection failed: ${err.message}\n`);
  process.exit(1);
});
/** Request headers a gRPC server reads; the pseudo-headers are set anew. */
const FORWARDED = ["content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding"];
const responseHeaders = (h: http2.IncomingHttpHeaders) => Object.fromEntries(Object.entries(h).filter(([k]) => k === ":status" || !k.startsWith(":")));

const server = http2.createServer();
server.on("stream", (stream, headers) => {
  const out: http2.OutgoingHttpHeaders = { ":method": "POST", ":path": headers[":path"] };
  for (const k of FORWARDED) if (headers[k] !== undefined) out[k] = headers[k];
  const req = upstream.request(out);
  stream.pipe(req);
  req.on("response", (h) => {
    // A trailers-only answer (a gRPC error) ends with its headers.
    if (h["grpc-status"] !== undefined) return stream.respond(responseHeaders(h), { endStream: true });
    let trailers: http2.OutgoingHttpHeaders = {};
    stream.respond(responseHeaders(h), { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers(trailers));
    req.on("trailers", (t) => (trailers = responseHeaders(t)));
    req.on("data", (d: Buffer) => stream.write(d));
    req.on("end", () => stream.end());
  });
  req.on("error", () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
  stream.on("error", () => req.close(http2.constants.NGHTTP2_CANCEL));
});
server.listen(0, "127.0.0.1", () => process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`));
process.on("SIGTERM", () => process.exit(0));
