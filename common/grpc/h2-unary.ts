// One gRPC unary call as one HTTP/2 stream (the gRPC-over-HTTP/2 protocol: a length-prefixed
// message each way, the status in the trailers), with the statuses grpc-js would give for the same
// failures, so that what the peer answers reaches the caller unchanged. The sidecar's calls to its
// driver and the controller's to the sidecars go this way rather than through grpc-js channels:
// their resolver, load-balancing, retry and filter layers do nothing for one known peer and cost
// 2-2.5x the client CPU per call of a plain HTTP/2 stream (docs/decisions/grpc-client-over-http2.md).
import * as http2 from "node:http2";
import { Metadata, status as Code } from "@grpc/grpc-js";
import { CallError, type MethodDef } from "./call-error.js";

export interface UnaryOptions {
  /** Absolute deadline (ms since epoch): sent as grpc-timeout and enforced here. */
  deadline: number;
  /** Cancels the call (RST_STREAM CANCEL) unless its deadline has passed (then DEADLINE_EXCEEDED wins). */
  signal?: AbortSignal;
  /** Request metadata (e.g. authorization), and pseudo-headers such as :authority. */
  headers?: Readonly<Record<string, string>>;
}

/**
 * How long a dial may take to reach the peer's HTTP/2 SETTINGS before its session is given up
 * (grpc-js's minimum connect timeout): a socket that takes the connection but never speaks HTTP/2.
 */
export const CONNECT_TIMEOUT_MS = 20_000;

/** The most an answer may hold, as grpc-js's and grpc-go's clients allow by default. */
export const MAX_RECEIVE_BYTES = 4 * 1024 * 1024;
const USER_AGENT = "csi-addons-healer";
const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM, NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_INADEQUATE_SECURITY } = http2.constants;

/**
 * Runs the call on `session`. `unusable` is told when the session refuses a new stream (out of
 * stream ids, or closing), so that the channel dials a fresh one.
 */
export function h2Unary<Req, Res>(
  session: http2.ClientHttp2Session,
  def: MethodDef<Req, Res>,
  request: Req,
  opts: UnaryOptions,
  unusable: () => void,
): Promise<Res> {
  return new Promise<Res>((resolve, reject) => {
    const { deadline, signal } = opts;
    if (signal?.aborted) return reject(new CallError(Code.CANCELLED, "call cancelled before it started"));
    const timeoutMs = Math.ceil(deadline - Date.now());
    if (timeoutMs <= 0) return reject(new CallError(Code.DEADLINE_EXCEEDED, "deadline exceeded before the call started"));
    const body = def.requestSerialize(request);
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request({
        ":method": "POST",
        ":path": def.path,
        "content-type": "application/grpc",
        te: "trailers",
        "grpc-timeout": grpcTimeout(timeoutMs),
        "grpc-accept-encoding": "identity",
        "user-agent": USER_AGENT,
        ...opts.headers,
      });
    } catch (err) {
      unusable();
      return reject(new CallError(Code.UNAVAILABLE, `the connection cannot take a call: ${(err as Error).message}`));
    }

    let settled = false;
    let httpStatus = 0;
    let status: { code: number; details: string; metadata: http2.IncomingHttpHeaders } | undefined;
    const chunks: Buffer[] = [];
    let received = 0;
    /** 5 + the message's length, once its prefix has arrived. */
    let expected = -1;

    const settle = (err: CallError | undefined, value?: Res) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      if (err === undefined) return resolve(value as Res);
      if (!stream.closed) stream.close(NGHTTP2_CANCEL);
      reject(err);
    };
    const fail = (code: number, details: string, metadata?: http2.IncomingHttpHeaders) => settle(new CallError(code, details, toMetadata(metadata)));
    const timer = setTimeout(() => fail(Code.DEADLINE_EXCEEDED, `deadline of ${timeoutMs} ms exceeded`), timeoutMs);
    const onAbort = () => {
      if (Date.now() < deadline) fail(Code.CANCELLED, "call cancelled");
    };
    signal?.addEventListener("abort", onAbort, { once: true });

    stream.on("response", (headers) => {
      httpStatus = Number(headers[":status"]);
      // Trailers-only: the status comes in the headers, with no message (an error, usually).
      if (headers["grpc-status"] !== undefined) status = readStatus(headers);
      else if (httpStatus !== 200) fail(...httpStatusToGrpc(httpStatus));
      else if (!String(headers["content-type"] ?? "").startsWith("application/grpc")) {
        fail(Code.UNKNOWN, `the peer answered with content-type ${headers["content-type"] ?? "(none)"}, not application/grpc`);
      }
    });
    stream.on("data", (chunk: Buffer) => {
      received += chunk.length;
      chunks.push(chunk);
      // Checked as the prefix arrives, so a huge or compressed message is refused before it is all here.
      if (expected < 0 && received >= 5) {
        const head = chunks.length === 1 ? chunk : Buffer.concat(chunks);
        if (head[0]! & 1) return fail(Code.INTERNAL, "the peer sent a compressed message although the call accepted only identity");
        const length = head.readUInt32BE(1);
        if (length > MAX_RECEIVE_BYTES) return fail(Code.RESOURCE_EXHAUSTED, `the answer of ${length} bytes exceeds the limit of ${MAX_RECEIVE_BYTES}`);
        expected = 5 + length;
      }
      if (expected >= 0 && received > expected) fail(Code.UNIMPLEMENTED, "Too many responses received");
    });
    stream.on("trailers", (trailers) => {
      status = readStatus(trailers);
    });
    // Every error ends in 'close', where the outcome is decided.
    let streamError: string | undefined;
    stream.on("error", (err: NodeJS.ErrnoException) => (streamError = err.code));
    stream.on("close", () => {
      if (settled) return;
      if (streamError !== undefined && SESSION_UNUSABLE.has(streamError)) {
        unusable();
        return fail(Code.UNAVAILABLE, `the connection cannot take a call (${streamError})`);
      }
      if (status !== undefined) {
        if (status.code !== Code.OK) return fail(status.code, status.details, status.metadata);
        if (expected < 0) {
          return received === 0 ? fail(Code.UNIMPLEMENTED, "No message received") : fail(Code.INTERNAL, "the answer ended inside its length prefix");
        }
        if (received !== expected) return fail(Code.INTERNAL, `the answer ended after ${received - 5} of ${expected - 5} bytes`);
        const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        let value: Res;
        try {
          value = def.responseDeserialize(all.subarray(5));
        } catch (err) {
          return fail(Code.INTERNAL, `the answer could not be decoded: ${(err as Error).message}`);
        }
        return settle(undefined, value);
      }
      fail(...endedWithoutStatus(stream.rstCode, httpStatus, session.destroyed || session.closed));
    });
    stream.end(frame(body));
  });
}

function frame(body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + body.length);
  out[0] = 0;
  out.writeUInt32BE(body.length, 1);
  body.copy(out, 5);
  return out;
}

/** Stream errors that say the session itself takes no more streams (Node reports them on the stream, not by throwing). */
const SESSION_UNUSABLE = new Set(["ERR_HTTP2_OUT_OF_STREAMS", "ERR_HTTP2_INVALID_SESSION", "ERR_HTTP2_GOAWAY_SESSION"]);

/** gRPC's timeout header: at most 8 digits and a unit. */
function grpcTimeout(ms: number): string {
  return ms < 1e8 ? `${ms}m` : `${Math.min(Math.ceil(ms / 1000), 99_999_999)}S`;
}

function readStatus(h: http2.IncomingHttpHeaders): { code: number; details: string; metadata: http2.IncomingHttpHeaders } {
  const code = Number(h["grpc-status"]);
  const raw = String(h["grpc-message"] ?? "");
  let details = raw;
  try {
    details = decodeURIComponent(raw);
  } catch {
    // Not valid percent-encoding: the text as sent.
  }
  return { code: Number.isInteger(code) && code >= 0 ? code : Code.UNKNOWN, details, metadata: h };
}

/** The status grpc-js gives a stream that ended without one (subchannel-call.ts). */
function endedWithoutStatus(rstCode: number | undefined, httpStatus: number, connectionLost: boolean): [number, string] {
  if (connectionLost) return [Code.UNAVAILABLE, "connection lost"];
  switch (rstCode) {
    case NGHTTP2_NO_ERROR:
    case undefined:
      return httpStatus !== 0 && httpStatus !== 200 ? httpStatusToGrpc(httpStatus) : [Code.INTERNAL, "the peer ended the call without a gRPC status"];
    case NGHTTP2_REFUSED_STREAM:
      return [Code.UNAVAILABLE, "Stream refused by the peer"];
    case NGHTTP2_CANCEL:
      return [Code.CANCELLED, "Call cancelled by the peer"];
    case NGHTTP2_ENHANCE_YOUR_CALM:
      return [Code.RESOURCE_EXHAUSTED, "Bandwidth exhausted or memory limit exceeded"];
    case NGHTTP2_INADEQUATE_SECURITY:
      return [Code.PERMISSION_DENIED, "Protocol not secure enough"];
    default:
      return [Code.INTERNAL, `Received RST_STREAM with code ${rstCode}`];
  }
}

function httpStatusToGrpc(http: number): [number, string] {
  const details = `Received HTTP status code ${http}`;
  if (http === 400) return [Code.INTERNAL, details];
  if (http === 401) return [Code.UNAUTHENTICATED, details];
  if (http === 403) return [Code.PERMISSION_DENIED, details];
  if (http === 404) return [Code.UNIMPLEMENTED, details];
  if (http === 429 || http === 502 || http === 503 || http === 504) return [Code.UNAVAILABLE, details];
  return [Code.UNKNOWN, details];
}

function toMetadata(h: http2.IncomingHttpHeaders | undefined): Metadata {
  if (h === undefined) return new Metadata();
  const kept: http2.IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && !k.startsWith("grpc-") && k !== "content-type") kept[k] = v;
  return Metadata.fromHttp2Headers(kept);
}
