// The few control loops a bare API server depends on to behave like one, run synchronously after
// each operation: the CRD establishing controller (serve a resource once its CRD exists, set its
// status and cleanup finalizer), CRD instance cleanup on delete, and the namespace lifecycle
// (refuse creates in missing or terminating namespaces, empty a namespace before removing it).
// There is deliberately no garbage collector: ownerReferences are only stored (see README).
import { CRD_CLEANUP_FINALIZER, crdTypes, establishedStatus, validateCrd } from "./crd.js";
import { isObject, metaOf, type Obj } from "./json.js";
import type { Ops } from "./ops.js";
import { groupResource, type ResourceType, storageKey } from "./resources.js";
import { forbidden, methodNotAllowed, notFound } from "./status.js";
import type { StoreEvent } from "./store.js";

const CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions";
const NS_KEY = "/namespaces";

const established = (crd: Obj) =>
  ((crd.status as Obj | undefined)?.conditions as Obj[] | undefined)?.some((c) => c.type === "Established" && c.status === "True") ?? false;
const finalizersOf = (o: Obj) => (metaOf(o).finalizers as string[] | undefined) ?? [];
const crdSpec = (crd: Obj) => crd.spec as { group: string; names: { plural: string } };

export function installControllers(ops: Ops): void {
  const reg = ops.registry;
  const crdType = reg.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")!;
  const nsType = reg.lookup("", "v1", "namespaces")!;
  const schemaValidate = crdType.validate;
  crdType.validate = (o) => [...(schemaValidate?.(o) ?? []), ...validateCrd(o)];
  const namespaced = () => [
    ...new Map(
      reg
        .all()
        .filter((t) => t.namespaced && !t.virtual)
        .map((t) => [storageKey(t), t]),
    ).values(),
  ];

  ops.admission.push((t, obj) => {
    const meta = metaOf(obj);
    if (t === nsType) {
      obj.spec = { ...(isObject(obj.spec) ? obj.spec : {}), finalizers: ["kubernetes"] };
      return;
    }
    if (t.custom) {
      const crd = ops.store.get(CRD_KEY, undefined, t.custom.crdName);
      if (crd && metaOf(crd).deletionTimestamp) throw methodNotAllowed("create not allowed while custom resource definition is terminating");
    }
    if (!t.namespaced) return;
    const ns = ops.store.get(NS_KEY, undefined, String(meta.namespace));
    if (!ns) throw notFound(groupResource(nsType), String(meta.namespace));
    if (metaOf(ns).deletionTimestamp)
      throw forbidden(
        groupResource(t),
        String(meta.name ?? ""),
        `unable to create new content in namespace ${String(meta.namespace)} because it is being terminated`,
      );
  });

  const instancesOf = (crd: Obj) => ops.store.count(`${crdSpec(crd).group}/${crdSpec(crd).names.plural}`);
  const finish = (t: ResourceType, o: Obj, strip: (o: Obj) => void) => {
    const next = structuredClone(o);
    strip(next);
    ops.update(t, undefined, String(metaOf(o).name), next, { direct: true });
  };

  const onCrd = (e: StoreEvent) => {
    const crd = e.object;
    const { group, names } = crdSpec(crd);
    if (e.type === "DELETED") {
      reg.setCustom(group, names.plural, []);
      ops.store.closeWatchers(`${group}/${names.plural}`);
      return;
    }
    if (!metaOf(crd).deletionTimestamp) {
      reg.setCustom(group, names.plural, crdTypes(crd));
      if (!established(crd) || !finalizersOf(crd).includes(CRD_CLEANUP_FINALIZER)) {
        const next = structuredClone(crd);
        metaOf(next).finalizers = [...new Set([...finalizersOf(crd), CRD_CLEANUP_FINALIZER])];
        if (!established(crd)) next.status = establishedStatus(crd);
        ops.update(crdType, undefined, e.name, next, { direct: true });
      }
      return;
    }
    // Terminating: delete every instance (those with finalizers stay until they are released).
    const t = reg.anyVersion(`${group}/${names.plural}`);
    if (t)
      for (const o of ops.store.list(storageKey(t)))
        if (!metaOf(o).deletionTimestamp) ops.delete(t, metaOf(o).namespace as string | undefined, String(metaOf(o).name));
    maybeFinishCrd(crd);
  };
  const maybeFinishCrd = (crd: Obj) => {
    const cur = ops.store.get(CRD_KEY, undefined, String(metaOf(crd).name));
    if (cur && metaOf(cur).deletionTimestamp && instancesOf(cur) === 0 && finalizersOf(cur).includes(CRD_CLEANUP_FINALIZER))
      finish(crdType, cur, (n) => (metaOf(n).finalizers = finalizersOf(n).filter((f) => f !== CRD_CLEANUP_FINALIZER)));
  };

  const maybeFinishNs = (name: string) => {
    const ns = ops.store.get(NS_KEY, undefined, name);
    if (!ns || !metaOf(ns).deletionTimestamp) return;
    if (namespaced().some((t) => ops.store.count(storageKey(t), name) > 0)) return;
    if (((ns.spec as Obj | undefined)?.finalizers as string[] | undefined)?.length) finish(nsType, ns, (n) => ((n.spec as Obj).finalizers = []));
  };
  const onNamespace = (e: StoreEvent) => {
    if (e.type !== "MODIFIED" || !metaOf(e.object).deletionTimestamp) return;
    for (const t of namespaced())
      for (const o of ops.store.list(storageKey(t), e.name)) if (!metaOf(o).deletionTimestamp) ops.delete(t, e.name, String(metaOf(o).name));
    maybeFinishNs(e.name);
  };

  ops.react((e) => {
    if (e.key === CRD_KEY) return onCrd(e);
    if (e.key === NS_KEY) return onNamespace(e);
    if (e.type !== "DELETED") return;
    const t = reg.anyVersion(e.key);
    if (t?.custom) {
      const crd = ops.store.get(CRD_KEY, undefined, t.custom.crdName);
      if (crd) maybeFinishCrd(crd);
    }
    if (e.namespace) maybeFinishNs(e.namespace);
  });
}
