// Discovery documents in the legacy (non-aggregated) format: /version, /api, /api/v1, /apis,
// /apis/<group>, /apis/<group>/<version>. Clients that ask for aggregated discovery
// (application/json;g=apidiscovery.k8s.io) get plain application/json and fall back to these,
// as they do against servers without aggregated discovery. There is no OpenAPI document: the
// /openapi paths answer 404, which kubectl treats as "no schema" (see README).
import type { Registry } from "./registry.js";
import { apiVersionOf, type ResourceType } from "./resources.js";

export const serverVersion = {
  major: "1",
  minor: "32",
  gitVersion: "v1.32.0-kube-api-harness",
  gitCommit: "0000000000000000000000000000000000000000",
  gitTreeState: "clean",
  buildDate: "2026-01-01T00:00:00Z",
  goVersion: "go1.23.0",
  compiler: "gc",
  platform: "linux/amd64",
};

function resourceEntries(t: ResourceType): Record<string, unknown>[] {
  const main: Record<string, unknown> = { name: t.plural, singularName: t.singular, namespaced: t.namespaced, kind: t.kind, verbs: [...t.verbs].sort() };
  if (t.shortNames?.length) main.shortNames = t.shortNames;
  if (t.categories?.length) main.categories = t.categories;
  const out = [main];
  if (t.statusSubresource)
    out.push({ name: `${t.plural}/status`, singularName: "", namespaced: t.namespaced, kind: t.kind, verbs: ["get", "patch", "update"] });
  return out;
}

const groupVersion = (name: string, v: string) => ({ groupVersion: name ? `${name}/${v}` : v, version: v });

function apiGroup(g: { name: string; versions: string[] }) {
  return { name: g.name, versions: g.versions.map((v) => groupVersion(g.name, v)), preferredVersion: groupVersion(g.name, g.versions[0]!) };
}

/** The discovery document for a non-resource GET path, or undefined when there is none. */
export function discoveryDoc(reg: Registry, path: string, host: string): unknown {
  const p = path.replace(/\/+$/, "") || "/";
  if (p === "/version") return serverVersion;
  if (p === "/api") return { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: host }] };
  const groups = reg.groups().filter((g) => g.name !== "");
  if (p === "/apis") return { kind: "APIGroupList", apiVersion: "v1", groups: groups.map(apiGroup) };
  const m = /^\/(?:api\/(v1)|apis\/([^/]+)(?:\/([^/]+))?)$/.exec(p);
  if (!m) return undefined;
  const [group, version] = m[1] ? ["", m[1]] : [m[2]!, m[3]];
  const g = reg.groups().find((x) => x.name === group);
  if (!g) return undefined;
  if (version === undefined) return { kind: "APIGroup", apiVersion: "v1", ...apiGroup(g) };
  const types = reg.inGroupVersion(group, version);
  if (types.length === 0) return undefined;
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: apiVersionOf(types[0]!),
    resources: types.sort((a, b) => a.plural.localeCompare(b.plural)).flatMap(resourceEntries),
  };
}
