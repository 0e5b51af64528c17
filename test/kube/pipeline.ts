// One HTTP request through the API server's filter chain, in the real order: authentication
// (401), then — for authenticated requests only — counting, injected latency and failures,
// authorization (403), and finally the handler. Every answer that is not a success is a Status.
import { PROTOBUF, decodeProtobuf } from "./protobuf.js";
import type { IncomingHttpHeaders } from "node:http";
import { type Attributes, Auth } from "./auth.js";
import { discoveryDoc } from "./discovery.js";
import { resourceVersionOption, type Counters, type FaultPlan } from "./faults.js";
import { handleResource, type Reply } from "./handler.js";
import { openapiV3Doc, openapiV3Root } from "./openapi.js";
import type { Ops } from "./ops.js";
import { parseRequest, type RequestInfo, resourceWithSub } from "./request.js";
import { selectedName } from "./selectors.js";
import { ApiError, badRequest, forbidden, forbiddenPath, injected, methodNotAllowed, pathNotFound, unauthorized, unsupportedMediaType } from "./status.js";
import { parse as parseYaml } from "yaml";

export interface PipelineDeps {
  ops: Ops;
  auth: Auth;
  counters: Counters;
  faults: FaultPlan;
  host: () => string;
}

const MAX_BODY = 3 * 1024 * 1024; // the real server's request size limit

/** Body formats for POST/PUT/DELETE (PATCH types are checked by patch.ts). Protobuf and CBOR
 *  get 415, on which client-go retries in JSON. */
const bodyTypes = ["application/json", "application/yaml", "*/*"];

/**
 * A request and its response over HTTP/1.1 or HTTP/2 (the server speaks both): what node:http's
 * and node:http2's compatibility objects share, and all the server uses.
 */
export interface KubeRequest extends AsyncIterable<Buffer> {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly headers: IncomingHttpHeaders;
  on(event: "close", listener: () => void): unknown;
  off(event: "close", listener: () => void): unknown;
}
export interface KubeResponse {
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  writeHead(code: number, headers: Record<string, string | string[] | number>): unknown;
  /** HTTP/1.1 only; an HTTP/2 response sends its headers at writeHead. */
  flushHeaders?(): void;
  write(chunk: string): boolean;
  end(): unknown;
  end(chunk: string): unknown;
  on(event: "close", listener: () => void): unknown;
  off(event: "close", listener: () => void): unknown;
}

async function readBody(req: KubeRequest, method: string): Promise<unknown> {
  const type = String(req.headers["content-type"] ?? "application/json")
    .split(";")[0]!
    .trim();
  if (method !== "PATCH" && !bodyTypes.includes(type) && type !== PROTOBUF) throw unsupportedMediaType(type, ["application/json", "application/yaml"]);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += c.length;
    if (size > MAX_BODY)
      throw new ApiError({
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: "Request entity too large: limit is 3145728",
        reason: "RequestEntityTooLarge",
        code: 413,
      });
    chunks.push(c);
  }
  if (type === PROTOBUF) {
    const decoded = decodeProtobuf(Buffer.concat(chunks));
    if (decoded === undefined) throw unsupportedMediaType(type, ["application/json", "application/yaml"]);
    return decoded;
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return undefined;
  try {
    return type === "application/yaml" ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw badRequest(`couldn't get version/kind; json parse error: ${(err as Error).message}`);
  }
}

function send(res: KubeResponse, code: number, body: unknown, headers: Record<string, string | string[]> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

function attributes(ri: RequestInfo): Attributes {
  if (!ri.isResource) return { kind: "path", verb: ri.verb, path: ri.path };
  const name = ri.name ?? (ri.verb === "list" || ri.verb === "watch" ? selectedName(ri.query.get("fieldSelector")) : undefined);
  return { kind: "resource", verb: ri.verb, group: ri.group, resource: resourceWithSub(ri), namespace: ri.namespace, name };
}

function nonResource(deps: PipelineDeps, ri: RequestInfo): Reply {
  if (ri.method !== "GET") throw methodNotAllowed("the server does not allow this method on the requested resource");
  if (/^\/(healthz|livez|readyz)\/?$/.test(ri.path)) return { code: 200, body: "ok" };
  const reg = deps.ops.registry;
  const p = ri.path.replace(/\/+$/, "");
  const doc = p === "/openapi/v3" ? openapiV3Root(reg) : p.startsWith("/openapi/v3/") ? openapiV3Doc(reg, p) : discoveryDoc(reg, ri.path, deps.host());
  if (doc === undefined) throw pathNotFound();
  return { code: 200, body: doc };
}

/** Resolves true after `ms`, or false as soon as the response closes. */
function waitWhileOpen(res: KubeResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (open: boolean) => {
      clearTimeout(timer);
      res.off("close", closed);
      resolve(open);
    };
    const closed = () => done(false);
    const timer = setTimeout(() => done(true), ms);
    res.on("close", closed);
  });
}

export async function handle(deps: PipelineDeps, req: KubeRequest, res: KubeResponse): Promise<void> {
  try {
    const ri = parseRequest(req.method ?? "GET", req.url ?? "/");
    const caller = deps.auth.authenticate(req.headers.authorization);
    if (!caller) throw unauthorized();
    const facts = {
      verb: ri.verb,
      resource: ri.isResource ? resourceWithSub(ri) : ri.path,
      path: ri.path,
      resourceVersion: resourceVersionOption(ri.verb, ri.query),
      selected: ri.verb === "list" || ri.verb === "watch" ? (selectedName(ri.query.get("fieldSelector")) ?? "") : undefined,
    };
    deps.counters.record(facts, caller.username);
    const delay = deps.faults.delayFor(facts);
    // A client that goes away meanwhile ends the request, as the real API server cancels it: no
    // timer is left to hold this process after the client (or the server's stop()) gave up.
    if (delay > 0 && !(await waitWhileOpen(res, delay))) return;
    const failure = deps.faults.takeFailure(facts);
    if (failure) throw injected(failure);
    const attrs = attributes(ri);
    if (deps.auth.requireRbac && !deps.auth.allowed(caller, attrs)) {
      const why = Auth.denial(caller, attrs);
      throw attrs.kind === "path" ? forbiddenPath(why) : forbidden({ group: attrs.group, resource: ri.resource }, attrs.name, why);
    }
    const body = ["POST", "PUT", "PATCH", "DELETE"].includes(ri.method) ? await readBody(req, ri.method) : undefined;
    const reply = ri.isResource
      ? handleResource(deps.ops, deps.auth, ri, caller, body, req, res, () => deps.counters.recordEvent(facts.resource, caller.username))
      : nonResource(deps, ri);
    if (!reply) return; // a watch stream owns the response now
    if (typeof reply.body === "string") {
      res.writeHead(reply.code, { "Content-Type": "text/plain; charset=utf-8" });
      res.end(reply.body);
      return;
    }
    const warnings = (reply.warnings ?? []).map((w) => `299 - ${JSON.stringify(w)}`);
    send(res, reply.code, reply.body, warnings.length ? { Warning: warnings } : {});
  } catch (err) {
    if (err instanceof ApiError) send(res, err.code, err.status, err.headers);
    else {
      const message = `Internal error occurred: ${(err as Error)?.message ?? String(err)}`;
      send(res, 500, {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message,
        reason: "InternalError",
        details: { causes: [{ message: String(err) }] },
        code: 500,
      });
    }
  }
}
