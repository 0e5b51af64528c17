// Which resource types are served right now: the built-ins plus whatever the established CRDs
// add. Lookups by URL (group, version, plural) and by manifest (apiVersion, kind); discovery
// reads the grouping. A custom resource's path exists only while its CRD does.
import { apiVersionOf, builtinTypes, type ResourceType, storageKey } from "./resources.js";

/** Groups in the order /apis lists them (built-ins first, like the real priority order). */
const builtinGroupOrder = ["", "apps", "authentication.k8s.io", "authorization.k8s.io", "coordination.k8s.io", "storage.k8s.io", "apiextensions.k8s.io"];

export class Registry {
  private readonly types = new Map<string, ResourceType>(); // "group/version/plural"

  constructor() {
    for (const t of builtinTypes()) this.add(t);
  }

  private add(t: ResourceType): void {
    this.types.set(`${t.group}/${t.version}/${t.plural}`, t);
  }

  lookup(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.get(`${group}/${version}/${plural}`);
  }

  byKind(apiVersion: string, kind: string): ResourceType | undefined {
    for (const t of this.types.values()) if (apiVersionOf(t) === apiVersion && t.kind === kind) return t;
    return undefined;
  }

  /** Any served version of a storage key (for controllers that work across versions). */
  anyVersion(key: string): ResourceType | undefined {
    for (const t of this.types.values()) if (storageKey(t) === key) return t;
    return undefined;
  }

  /** Replaces every version of a custom resource with `types` (empty = unregister). */
  setCustom(group: string, plural: string, types: ResourceType[]): void {
    for (const [k, t] of this.types) if (t.custom && t.group === group && t.plural === plural) this.types.delete(k);
    for (const t of types) this.add(t);
  }

  all(): ResourceType[] {
    return [...this.types.values()];
  }

  /** group → versions (preferred = first served; for CRDs the storage version goes first). */
  groups(): { name: string; versions: string[] }[] {
    const byGroup = new Map<string, string[]>();
    for (const t of this.types.values()) {
      const vs = byGroup.get(t.group) ?? [];
      if (!vs.includes(t.version)) vs.push(t.version);
      if (t.custom && t.version === t.custom.storageVersion) vs.unshift(vs.splice(vs.indexOf(t.version), 1)[0]!);
      byGroup.set(t.group, vs);
    }
    const rank = (g: string) => (builtinGroupOrder.includes(g) ? builtinGroupOrder.indexOf(g) : builtinGroupOrder.length);
    return [...byGroup.entries()].sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b)).map(([name, versions]) => ({ name, versions }));
  }

  inGroupVersion(group: string, version: string): ResourceType[] {
    return this.all().filter((t) => t.group === group && t.version === version);
  }
}
