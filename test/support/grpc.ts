// Promise wrappers for generated grpc-js clients, for tests acting as the healer controller.
import * as grpc from "@grpc/grpc-js";

/** grpc.health.v1.Health/Check on a client made with makeClientConstructor (which has no typed methods). */
export type HealthCheck = (
  req: { service: string },
  opts: { deadline: number },
  cb: (err: Error | null, res: { status: string }) => void,
) => grpc.ClientUnaryCall;

export type Outcome<T> = { ok: true; value: T } | { ok: false; code: grpc.status; details: string };

type UnaryMethod<Req, Res> = (
  req: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  cb: (err: grpc.ServiceError | null, res: Res) => void,
) => grpc.ClientUnaryCall;

/** Calls a unary method and returns its value or its status (never throws for a gRPC error). */
export function call<Req, Res>(
  client: grpc.Client,
  method: UnaryMethod<Req, Res>,
  req: Req,
  opts: { deadlineMs?: number; metadata?: Record<string, string> } = {},
): Promise<Outcome<Res>> {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(opts.metadata ?? {})) md.set(k, v);
  return new Promise((resolve) => {
    method.call(client, req, md, { deadline: Date.now() + (opts.deadlineMs ?? 20_000) }, (err, res) =>
      resolve(err ? { ok: false, code: err.code, details: err.details } : { ok: true, value: res }),
    );
  });
}

export function codeName(code: grpc.status): string {
  return grpc.status[code] ?? String(code);
}

/** A call whose settling can be observed without awaiting it. */
export function track<T>(p: Promise<Outcome<T>>): { done: () => boolean; outcome: Promise<Outcome<T>> } {
  let settled = false;
  return { done: () => settled, outcome: p.finally(() => (settled = true)) };
}

export interface RawOutcome {
  code: grpc.status;
  details: string;
  /** The response's bytes as sent (empty unless OK). */
  value: Buffer;
}

const asIs = (b: Buffer) => b;

/** A unary call with the request body as given (no serializer) and any metadata: bytes in, status and bytes out. */
export function rawUnary(
  client: grpc.Client,
  path: string,
  body: Buffer,
  metadata: Record<string, string | Buffer> = {},
  deadlineMs = 10_000,
): Promise<RawOutcome> {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, asIs, asIs, body, md, { deadline: Date.now() + deadlineMs }, (err, value) =>
      resolve(err ? { code: err.code, details: err.details, value: Buffer.alloc(0) } : { code: grpc.status.OK, details: "", value: value! }),
    );
  });
}
