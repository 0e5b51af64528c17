// A minimal OpenAPI v3 surface: the root index and one document per group-version listing each
// resource's PATCH operation with its x-kubernetes-group-version-kind and the fieldValidation
// parameter. That is what kubectl reads to decide that the server validates fields itself (so
// `kubectl apply` needs no client-side schema). There are no type schemas: `kubectl explain` and
// OpenAPI-driven strategic merge do not work (kubectl falls back to its built-in types).
import type { Registry } from "./registry.js";
import type { ResourceType } from "./resources.js";

const gvPath = (t: { group: string; version: string }) => (t.group ? `apis/${t.group}/${t.version}` : `api/${t.version}`);

export function openapiV3Root(reg: Registry): unknown {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const t of reg.all()) paths[gvPath(t)] = { serverRelativeURL: `/openapi/v3/${gvPath(t)}?hash=0` };
  return { paths };
}

function patchOperation(t: ResourceType): unknown {
  const types = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];
  return {
    operationId: `patch${t.kind}`,
    parameters: [
      { name: "dryRun", in: "query", schema: { type: "string", uniqueItems: true } },
      { name: "fieldManager", in: "query", schema: { type: "string", uniqueItems: true } },
      { name: "fieldValidation", in: "query", schema: { type: "string", uniqueItems: true } },
    ],
    requestBody: { content: Object.fromEntries(types.map((c) => [c, { schema: { type: "object" } }])), required: true },
    responses: { "200": { description: "OK" } },
    "x-kubernetes-action": "patch",
    "x-kubernetes-group-version-kind": { group: t.group, version: t.version, kind: t.kind },
  };
}

/** The document for "/openapi/v3/api/v1" or "/openapi/v3/apis/<g>/<v>", or undefined. */
export function openapiV3Doc(reg: Registry, path: string): unknown {
  const rel = path.replace(/^\/openapi\/v3\//, "").replace(/\/+$/, "");
  const types = reg.all().filter((t) => gvPath(t) === rel && !t.virtual);
  if (types.length === 0 && !reg.all().some((t) => gvPath(t) === rel)) return undefined;
  const paths: Record<string, unknown> = {};
  for (const t of types) {
    const scope = t.namespaced ? "/namespaces/{namespace}" : "";
    paths[`/${gvPath(t)}${scope}/${t.plural}/{name}`] = { patch: patchOperation(t) };
  }
  return { openapi: "3.0.0", info: { title: "Kubernetes", version: "v1.32.0" }, paths, components: { schemas: {} } };
}
