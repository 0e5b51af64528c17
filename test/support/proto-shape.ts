// The wire-relevant shape of one .proto file as lines "kind path" → description, so two copies of
// a contract compare line by line and every difference is named: services, methods (types and
// streaming), messages, nested messages, enums and their values, fields (name, number, type,
// repeated/optional, map key/value types, oneof membership, options such as csi_secret) and
// extensions. Parsed from text with protobufjs, without resolving imports.
import protobuf from "protobufjs";

export interface Shape {
  pkg: string;
  /** e.g. "field ReplicationSource.volume" → "ReplicationSource.VolumeSource volume = 1 (oneof type)". */
  entries: Map<string, string>;
  /** Message path → its field numbers (to their names) and reserved numbers. */
  messages: Map<string, { fields: Map<number, string>; reserved: Array<[number, number]> }>;
}

export function shapeOf(text: string): Shape {
  const parsed = protobuf.parse(text, { keepCase: true });
  const pkg = parsed.package ?? "";
  const top = pkg ? parsed.root.lookup(pkg) : parsed.root;
  if (!(top instanceof protobuf.Namespace)) throw new Error(`package ${pkg} declares nothing`);
  const shape: Shape = { pkg, entries: new Map(), messages: new Map() };
  walk(top, "", shape);
  return shape;
}

/**
 * A type reference as one name whichever way it was written: resolved within the file to its
 * full name when it is declared there ("VolumeSource" inside ReplicationSource is
 * "ReplicationSource.VolumeSource"), else as written; no leading dot, no own package prefix.
 */
function typeName(scope: protobuf.Namespace, written: string, pkg: string): string {
  const name = (scope.lookup(written)?.fullName ?? written).replace(/^\./, "");
  return pkg && name.startsWith(`${pkg}.`) ? name.slice(pkg.length + 1) : name;
}

function options(o: { [k: string]: unknown } | undefined): string {
  const shown = Object.entries(o ?? {})
    .filter(([k]) => k !== "proto3_optional")
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .sort();
  return shown.length ? ` [${shown.join(", ")}]` : "";
}

function field(f: protobuf.FieldBase, scope: protobuf.Namespace, pkg: string): string {
  const type = typeName(scope, f.type, pkg);
  const label = f.options?.["proto3_optional"] ? "optional " : f.repeated ? "repeated " : "";
  const written = f instanceof protobuf.MapField ? `map<${f.keyType}, ${type}>` : `${label}${type}`;
  // proto3 `optional` is a oneof of its own in protobufjs; it is shown as the label instead.
  const oneof = f.partOf && !f.options?.["proto3_optional"] ? ` (oneof ${f.partOf.name})` : "";
  return `${written} ${f.name} = ${f.id}${oneof}${options(f.options)}`;
}

function walk(ns: protobuf.Namespace, prefix: string, shape: Shape): void {
  const { entries, pkg } = shape;
  for (const o of ns.nestedArray) {
    const path = prefix + o.name;
    if (o instanceof protobuf.Service) {
      entries.set(`service ${path}`, "service");
      for (const m of o.methodsArray) {
        const req = `${m.requestStream ? "stream " : ""}${typeName(o, m.requestType, pkg)}`;
        const res = `${m.responseStream ? "stream " : ""}${typeName(o, m.responseType, pkg)}`;
        entries.set(`rpc ${path}.${m.name}`, `rpc ${m.name}(${req}) returns (${res})`);
      }
    } else if (o instanceof protobuf.Type) {
      entries.set(`message ${path}`, "message");
      for (const f of o.fieldsArray) entries.set(`field ${path}.${f.name}`, field(f, o, pkg));
      for (const one of o.oneofsArray) if (!one.name.startsWith("_")) entries.set(`oneof ${path}.${one.name}`, `oneof ${one.name}`);
      const reserved = (o.reserved ?? []).filter((r) => typeof r !== "string").map(([a, b]) => [a!, b!] as [number, number]);
      shape.messages.set(path, { fields: new Map(o.fieldsArray.map((f) => [f.id, f.name])), reserved });
      walk(o, `${path}.`, shape);
    } else if (o instanceof protobuf.Enum) {
      entries.set(`enum ${path}`, "enum");
      for (const [name, n] of Object.entries(o.values)) entries.set(`value ${path}.${name}`, `${name} = ${n}`);
    } else if (o instanceof protobuf.Field && o.extend !== undefined) {
      entries.set(`extend ${o.extend}.${o.name}`, field(o, ns, pkg));
    } else if (o instanceof protobuf.Namespace) {
      walk(o, `${path}.`, shape);
    }
  }
}

/** Whether a message of the shape uses field number n (by which field), reserves it, or leaves it free. */
export function numberIn(shape: Shape, message: string, n: number): string {
  const m = shape.messages.get(message);
  const name = m?.fields.get(n);
  if (name !== undefined) return `used by ${name}`;
  return m?.reserved.some(([a, b]) => a <= n && n <= b) ? "reserved" : "free";
}
