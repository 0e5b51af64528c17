// The protobuf request bodies clients send for built-in kinds (`kubectl auth can-i` posts its
// SelfSubjectAccessReview as application/vnd.kubernetes.protobuf), decoded to the JSON form the
// rest of the server handles. Only the access reviews are understood; any other protobuf body is
// refused with 415, as a server without that kind's protobuf codec would. Answers stay JSON: a
// client that offers protobuf also accepts JSON, and reads whichever Content-Type comes back.
// Wire layout (k8s.io/apimachinery runtime.Unknown and k8s.io/api/authorization/v1 generated.proto):
//   "k8s\0" + Unknown{typeMeta=1{apiVersion=1, kind=2}, raw=2, contentEncoding=3, contentType=4}
//   SelfSubjectAccessReview{metadata=1, spec=2{resourceAttributes=1, nonResourceAttributes=2}}
//   SubjectAccessReview{metadata=1, spec=2{resourceAttributes=1, nonResourceAttributes=2, user=3, groups=4, uid=6}}
//   ResourceAttributes{namespace=1, verb=2, group=3, version=4, resource=5, subresource=6, name=7}
//   NonResourceAttributes{path=1, verb=2}
import protobuf from "protobufjs";

export const PROTOBUF = "application/vnd.kubernetes.protobuf";
const MAGIC = Buffer.from("k8s\0", "latin1");

type Fields = Map<number, (Uint8Array | number)[]>;

function fieldsOf(bytes: Uint8Array): Fields {
  const r = protobuf.Reader.create(bytes);
  const out: Fields = new Map();
  while (r.pos < r.len) {
    const tag = r.uint32();
    const no = tag >>> 3;
    const wire = tag & 7;
    const value = wire === 2 ? r.bytes() : wire === 0 ? r.uint32() : (r.skipType(wire), undefined);
    if (value !== undefined) out.set(no, [...(out.get(no) ?? []), value]);
  }
  return out;
}

const text = (f: Fields, no: number) => {
  const v = f.get(no)?.[0];
  return v instanceof Uint8Array ? Buffer.from(v).toString("utf8") : undefined;
};
const texts = (f: Fields, no: number) => (f.get(no) ?? []).flatMap((v) => (v instanceof Uint8Array ? [Buffer.from(v).toString("utf8")] : []));
const message = (f: Fields, no: number) => {
  const v = f.get(no)?.[0];
  return v instanceof Uint8Array ? fieldsOf(v) : undefined;
};

function resourceAttributes(f: Fields) {
  const names = ["namespace", "verb", "group", "version", "resource", "subresource", "name"];
  return Object.fromEntries(names.flatMap((n, i) => (text(f, i + 1) !== undefined ? [[n, text(f, i + 1)]] : [])));
}

/** The JSON form of a protobuf body, or undefined when it is not an access review. */
export function decodeProtobuf(body: Buffer): unknown {
  if (!body.subarray(0, 4).equals(MAGIC)) return undefined;
  const unknown = fieldsOf(body.subarray(4));
  const typeMeta = message(unknown, 1);
  const raw = message(unknown, 2);
  const [apiVersion, kind] = [typeMeta && text(typeMeta, 1), typeMeta && text(typeMeta, 2)];
  if (!raw || apiVersion !== "authorization.k8s.io/v1" || (kind !== "SelfSubjectAccessReview" && kind !== "SubjectAccessReview")) return undefined;
  const spec = message(raw, 2) ?? new Map();
  const res = message(spec, 1);
  const nonRes = message(spec, 2);
  return {
    apiVersion,
    kind,
    metadata: {},
    spec: {
      ...(res ? { resourceAttributes: resourceAttributes(res) } : {}),
      ...(nonRes ? { nonResourceAttributes: { path: text(nonRes, 1), verb: text(nonRes, 2) } } : {}),
      ...(kind === "SubjectAccessReview" ? { user: text(spec, 3), groups: texts(spec, 4), uid: text(spec, 6) } : {}),
    },
  };
}
