// URL + method → what is being done, after k8s.io/apiserver's RequestInfoFactory: the verb by
// Kubernetes' names (a GET is get, list or watch), group/version, namespace, resource, name and
// subresource. Counters, faults, RBAC and routing all read this one interpretation.

export interface RequestInfo {
  method: string;
  path: string;
  query: URLSearchParams;
  isResource: boolean;
  verb: string;
  group: string;
  version: string;
  namespace?: string;
  resource: string;
  name?: string;
  subresource?: string;
  /** Path segments beyond …/name/subresource: no such route. */
  extra: boolean;
}

const namespaceSubresources = new Set(["status", "finalize"]);

export function parseRequest(method: string, rawUrl: string): RequestInfo {
  const url = new URL(rawUrl, "http://kube-api.invalid");
  const path = url.pathname;
  const query = url.searchParams;
  const parts = path
    .split("/")
    .filter((p) => p !== "")
    .map(decodeURIComponent);
  const base: RequestInfo = { method, path, query, isResource: false, verb: method.toLowerCase(), group: "", version: "", resource: "", extra: false };

  let rest: string[];
  if (parts[0] === "api" && parts.length >= 3) {
    base.version = parts[1]!;
    rest = parts.slice(2);
  } else if (parts[0] === "apis" && parts.length >= 4) {
    base.group = parts[1]!;
    base.version = parts[2]!;
    rest = parts.slice(3);
  } else return base;

  const isWatch = query.get("watch") === "true" || query.get("watch") === "1";
  let legacyWatch = false;
  if (rest[0] === "watch") {
    legacyWatch = true;
    rest = rest.slice(1);
  }
  if (rest[0] === "namespaces" && rest.length > 1) {
    base.namespace = rest[1];
    if (rest.length > 2 && !namespaceSubresources.has(rest[2]!)) rest = rest.slice(2);
  }
  base.isResource = rest.length > 0;
  base.resource = rest[0] ?? "";
  base.name = rest[1];
  base.subresource = rest[2];
  base.extra = rest.length > 3;

  switch (method) {
    case "GET":
    case "HEAD":
      base.verb = isWatch || legacyWatch ? "watch" : base.name !== undefined ? "get" : "list";
      break;
    case "POST":
      base.verb = "create";
      break;
    case "PUT":
      base.verb = "update";
      break;
    case "PATCH":
      base.verb = "patch";
      break;
    case "DELETE":
      base.verb = base.name !== undefined ? "delete" : "deletecollection";
      break;
    default:
      base.verb = method.toLowerCase();
  }
  return base;
}

/** "csiaddonsnodes" or "csiaddonsnodes/status": the resource as counters and RBAC name it. */
export const resourceWithSub = (ri: RequestInfo) => (ri.subresource ? `${ri.resource}/${ri.subresource}` : ri.resource);
