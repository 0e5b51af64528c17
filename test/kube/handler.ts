// Routing of resource requests to the verbs: which paths exist (404 for unknown resources,
// wrong scope, unknown subresources), which verbs a resource allows (405), and the HTTP codes
// of success (201 create, 200 otherwise). Watch streams are handed to watch.ts.
import type { KubeRequest, KubeResponse } from "./pipeline.js";
import type { Auth, Subject } from "./auth.js";
import { parseFieldValidation } from "./admit.js";
import { isObject, type Obj } from "./json.js";
import { listObjects } from "./list.js";
import type { Ops, WriteOpts } from "./ops.js";
import type { RequestInfo } from "./request.js";
import { groupResource, type ResourceType, type Verb } from "./resources.js";
import { answerReview } from "./reviews.js";
import { badRequest, deleted, methodNotAllowed, pathNotFound } from "./status.js";
import { asTable, wantsTable } from "./table.js";
import { serveWatch } from "./watch.js";
import { issueToken } from "./token-request.js";
import { evictPod } from "./eviction.js";

export interface Reply {
  code: number;
  body: unknown;
  warnings?: string[];
}

const notAllowed = () => methodNotAllowed("the server does not allow this method on the requested resource");

/** serviceaccounts/{name}/token and pods/{name}/eviction: the create-only subresources served. */
const isTokenRequest = (t: ResourceType, ri: RequestInfo) => t.group === "" && t.plural === "serviceaccounts" && ri.subresource === "token";
const isEviction = (t: ResourceType, ri: RequestInfo) => t.group === "" && t.plural === "pods" && ri.subresource === "eviction";

/** Resolves the type and the object's namespace for a resource request, or throws 404/405. */
function route(ops: Ops, ri: RequestInfo): { t: ResourceType; ns: string | undefined } {
  const t = ops.registry.lookup(ri.group, ri.version, ri.resource);
  if (!t || ri.extra) throw pathNotFound();
  const isNs = t.group === "" && t.plural === "namespaces";
  const ns = isNs ? undefined : ri.namespace;
  if (!isNs && !t.namespaced && ri.namespace !== undefined) throw pathNotFound();
  if (t.namespaced && ns === undefined && !(ri.verb === "list" || ri.verb === "watch")) throw pathNotFound();
  if (isTokenRequest(t, ri) || isEviction(t, ri)) {
    if (ri.verb !== "create") throw notAllowed();
  } else if (ri.subresource !== undefined) {
    if (ri.subresource !== "status" || !t.statusSubresource) throw pathNotFound();
    if (!["get", "update", "patch"].includes(ri.verb)) throw notAllowed();
  } else if (!t.verbs.includes(ri.verb as Verb)) throw notAllowed();
  return { t, ns };
}

function writeOpts(ri: RequestInfo): WriteOpts {
  const dry = ri.query.getAll("dryRun");
  if (dry.some((d) => d !== "All")) throw badRequest(`dryRun: Unsupported value: "${dry.join(",")}": supported values: "All"`);
  return {
    dryRun: dry.length > 0,
    fieldValidation: parseFieldValidation(ri.query.get("fieldValidation")),
    subresource: ri.subresource === "status" ? "status" : undefined,
  };
}

/** Handles one resource request; returns the reply, or undefined when it streamed (watch). */
export function handleResource(
  ops: Ops,
  auth: Auth,
  ri: RequestInfo,
  caller: Subject,
  body: unknown,
  req: KubeRequest,
  res: KubeResponse,
  /** Told of each event a watch sends (bookmarks aside). */
  sent?: () => void,
): Reply | undefined {
  const { t, ns } = route(ops, ri);
  const name = ri.name!;
  const table = wantsTable(req.headers.accept);
  switch (ri.verb) {
    case "get": {
      const obj = ops.get(t, ns, name);
      return { code: 200, body: table ? asTable(t, [obj], {}) : obj };
    }
    case "list": {
      const list = listObjects(ops, t, ns, ri.query);
      return { code: 200, body: table ? asTable(t, list.items as Obj[], list.metadata as Obj) : list };
    }
    case "watch": {
      if (ri.name !== undefined) {
        const fs = ri.query.get("fieldSelector");
        ri.query.set("fieldSelector", [`metadata.name=${ri.name}`, ...(fs ? [fs] : [])].join(","));
      }
      serveWatch(ops, t, ns, ri.query, req, res, table ? (o) => asTable(t, [o], { resourceVersion: (o.metadata as Obj).resourceVersion }) : undefined, sent);
      return undefined;
    }
    case "create": {
      if (t.virtual) return { code: 201, body: answerReview(t, auth, body, caller) };
      if (isTokenRequest(t, ri)) return { code: 201, body: issueToken(ops, auth, t, ns!, name, body) };
      if (isEviction(t, ri)) return { code: 201, body: evictPod(ops, t, ns!, name, body) };
      const r = ops.create(t, ns, body, writeOpts(ri));
      return { code: 201, body: r.obj, warnings: r.warnings };
    }
    case "update": {
      const r = ops.update(t, ns, name, body, writeOpts(ri));
      return { code: 200, body: r.obj, warnings: r.warnings };
    }
    case "patch": {
      const r = ops.patch(t, ns, name, body, String(req.headers["content-type"] ?? ""), writeOpts(ri));
      return { code: 200, body: r.obj, warnings: r.warnings };
    }
    case "delete": {
      const options = isObject(body) ? (body as { preconditions?: { uid?: string; resourceVersion?: string } }) : {};
      const r = ops.delete(t, ns, name, options, writeOpts(ri));
      const uid = String((r.obj.metadata as Obj).uid);
      return { code: 200, body: r.deleted && !t.returnDeletedObject ? deleted(groupResource(t), name, uid) : r.obj };
    }
    default:
      throw notAllowed();
  }
}
