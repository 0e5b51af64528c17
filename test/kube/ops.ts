// The verbs' semantics on stored objects — what the real generic registry does between the
// HTTP handler and etcd: server-set metadata, resourceVersion preconditions (409 Conflict),
// unconditional-update refusal for custom resources, status subresource rules, generation,
// finalizers and deletionTimestamp, no-op updates that write nothing. Both HTTP and the direct
// test API go through here, so both keep these rules.
import { randomUUID } from "node:crypto";
import { admit, checkNamespace, checkTypeMeta, type FieldValidation, nextGeneration, unconditionalUpdateRefused } from "./admit.js";
import { clone, deepEqual, metaOf, nowRfc3339, type Obj } from "./json.js";
import { generateName } from "./meta.js";
import { applyPatch } from "./patch.js";
import type { Registry } from "./registry.js";
import { apiVersionOf, groupResource, type ResourceType, storageKey } from "./resources.js";
import { alreadyExists, badRequest, conflict, fieldForbidden, invalidObject, notFound, staleConflict } from "./status.js";
import type { Store, StoreEvent } from "./store.js";

export interface WriteOpts {
  dryRun?: boolean;
  fieldValidation?: FieldValidation;
  /** Direct test access: the whole object is written, status (and a given uid) included (see README). */
  direct?: boolean;
  subresource?: "status";
  /** PATCH may omit resourceVersion even for custom resources. */
  unconditionalOk?: boolean;
}
export interface WriteResult {
  obj: Obj;
  warnings: string[];
}
export interface DeleteResult {
  obj: Obj;
  deleted: boolean;
}
export interface DeleteOptions {
  preconditions?: { uid?: string; resourceVersion?: string };
}

/** Admission plugins (namespace lifecycle, CRD terminating) may refuse or adjust a create. */
export type AdmitCreate = (t: ResourceType, obj: Obj) => void;

const isNamespace = (t: ResourceType) => t.group === "" && t.plural === "namespaces";

export class Ops {
  readonly admission: AdmitCreate[] = [];
  private readonly reactors: ((e: StoreEvent) => void)[] = [];
  private readonly queue: StoreEvent[] = [];
  private depth = 0;
  private draining = false;

  constructor(
    readonly registry: Registry,
    readonly store: Store,
  ) {
    store.onEvent((e) => this.queue.push(e));
  }

  /** Controllers react to committed events after the operation that caused them finished. */
  react(fn: (e: StoreEvent) => void): void {
    this.reactors.push(fn);
  }

  private run<T>(fn: () => T): T {
    this.depth++;
    try {
      return fn();
    } finally {
      this.depth--;
      if (this.depth === 0 && !this.draining) this.drain();
    }
  }

  private drain(): void {
    this.draining = true;
    try {
      for (let e = this.queue.shift(); e; e = this.queue.shift()) for (const r of this.reactors) r(e);
    } finally {
      this.draining = false;
    }
  }

  /** A stored object as served through `t`'s version (custom resources store one version). */
  present(t: ResourceType, o: Obj): Obj {
    return { ...o, apiVersion: apiVersionOf(t) };
  }

  private storedVersion(t: ResourceType, o: Obj): void {
    o.apiVersion = t.custom ? `${t.group}/${t.custom.storageVersion}` : apiVersionOf(t);
  }

  pendingFinalizers(t: ResourceType, o: Obj): string[] {
    const fin = (metaOf(o).finalizers as string[] | undefined) ?? [];
    const nsFin = isNamespace(t) ? (((o.spec as Obj | undefined)?.finalizers as string[] | undefined) ?? []) : [];
    return [...fin, ...nsFin];
  }

  get(t: ResourceType, ns: string | undefined, name: string): Obj {
    const o = this.store.get(storageKey(t), ns, name);
    if (!o) throw notFound(groupResource(t), name);
    return this.present(t, o);
  }

  create(t: ResourceType, ns: string | undefined, body: unknown, opts: WriteOpts = {}): WriteResult {
    return this.run(() => {
      const obj = checkTypeMeta(t, clone(body));
      checkNamespace(t, obj, ns);
      const meta = metaOf(obj);
      if (!meta.name && typeof meta.generateName === "string" && meta.generateName) meta.name = generateName(meta.generateName);
      for (const a of this.admission) a(t, obj);
      // Direct (seed) creates may carry a uid/creationTimestamp, so fixtures can wire ownerReferences.
      if (!opts.direct || typeof meta.uid !== "string" || !meta.uid) meta.uid = randomUUID();
      if (!opts.direct || typeof meta.creationTimestamp !== "string") meta.creationTimestamp = nowRfc3339();
      for (const k of ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields"]) delete meta[k];
      if (t.tracksGeneration) meta.generation = 1;
      else delete meta.generation;
      if (t.statusOnCreate && !opts.direct) {
        const s = t.statusOnCreate();
        if (s === undefined) delete obj.status;
        else obj.status = s;
      }
      const warnings = admit(t, obj, undefined, opts.fieldValidation ?? "Warn");
      const name = String(meta.name);
      if (this.store.get(storageKey(t), ns, name)) throw alreadyExists(groupResource(t), name);
      this.storedVersion(t, obj);
      const stored = opts.dryRun ? obj : this.store.put(storageKey(t), obj);
      return { obj: this.present(t, stored), warnings };
    });
  }

  update(t: ResourceType, ns: string | undefined, name: string, body: unknown, opts: WriteOpts = {}): WriteResult {
    return this.run(() => {
      const current = this.store.get(storageKey(t), ns, name);
      if (!current) throw notFound(groupResource(t), name);
      const cur = metaOf(current);
      const obj = checkTypeMeta(t, clone(body));
      const meta = metaOf(obj);
      if (meta.name !== name) throw badRequest(`the name of the object (${String(meta.name ?? "")}) does not match the name on the URL (${name})`);
      checkNamespace(t, obj, ns);
      if (meta.resourceVersion === undefined || meta.resourceVersion === "") {
        if (!t.allowUnconditionalUpdate && !opts.unconditionalOk && !opts.direct) throw unconditionalUpdateRefused(t, name);
      } else if (meta.resourceVersion !== cur.resourceVersion) throw staleConflict(groupResource(t), name);
      if (meta.uid && meta.uid !== cur.uid)
        throw conflict(groupResource(t), name, `Precondition failed: UID in precondition: ${String(meta.uid)}, UID in object meta: ${String(cur.uid)}`);

      let next: Obj;
      if (opts.subresource === "status") {
        // /status changes status only; everything else stays as stored.
        next = clone(current);
        if (obj.status === undefined) delete next.status;
        else next.status = obj.status;
      } else {
        next = obj;
        if (t.statusSubresource && !opts.direct) {
          if (current.status === undefined) delete next.status;
          else next.status = clone(current.status);
        }
      }
      const nm = metaOf(next);
      for (const k of ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"]) {
        if (cur[k] === undefined) delete nm[k];
        else nm[k] = cur[k];
      }
      nm.resourceVersion = cur.resourceVersion;
      this.storedVersion(t, next);
      const gen = nextGeneration(t, next, current);
      if (gen === undefined) delete nm.generation;
      else nm.generation = gen;
      if (cur.deletionTimestamp) {
        const added = this.pendingFinalizers(t, next).filter((f) => !this.pendingFinalizers(t, current).includes(f));
        if (added.length > 0)
          throw invalidObject({ group: t.group, kind: t.kind }, name, [
            fieldForbidden(
              "metadata.finalizers",
              `no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(", ")}}`,
            ),
          ]);
      }
      const warnings = admit(t, next, this.present(t, current), opts.fieldValidation ?? "Warn");
      if (deepEqual(next, current) || opts.dryRun) return { obj: this.present(t, opts.dryRun ? next : current), warnings };
      if (cur.deletionTimestamp && this.pendingFinalizers(t, next).length === 0) {
        // Removing the last finalizer of an object being deleted deletes it.
        return { obj: this.present(t, this.store.remove(storageKey(t), ns, name, next)!), warnings };
      }
      return { obj: this.present(t, this.store.put(storageKey(t), next)), warnings };
    });
  }

  patch(t: ResourceType, ns: string | undefined, name: string, body: unknown, contentType: string, opts: WriteOpts = {}): WriteResult {
    return this.run(() => {
      const current = this.get(t, ns, name);
      const patched = applyPatch(current, body, contentType, t.custom !== undefined);
      return this.update(t, ns, name, patched, { ...opts, unconditionalOk: true });
    });
  }

  delete(t: ResourceType, ns: string | undefined, name: string, options: DeleteOptions = {}, opts: WriteOpts = {}): DeleteResult {
    return this.run(() => {
      const current = this.store.get(storageKey(t), ns, name);
      if (!current) throw notFound(groupResource(t), name);
      const cur = metaOf(current);
      const pre = options.preconditions ?? {};
      if (pre.uid && pre.uid !== cur.uid)
        throw conflict(groupResource(t), name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${String(cur.uid)}`);
      if (pre.resourceVersion && pre.resourceVersion !== cur.resourceVersion)
        throw conflict(
          groupResource(t),
          name,
          `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${String(cur.resourceVersion)}`,
        );
      if (this.pendingFinalizers(t, current).length > 0) {
        // Graceful: mark and keep it readable until the finalizers are gone.
        if (cur.deletionTimestamp) return { obj: this.present(t, current), deleted: false };
        const next = clone(current);
        metaOf(next).deletionTimestamp = nowRfc3339();
        metaOf(next).deletionGracePeriodSeconds = 0;
        if (isNamespace(t)) next.status = { ...(next.status as Obj | undefined), phase: "Terminating" };
        return { obj: this.present(t, opts.dryRun ? next : this.store.put(storageKey(t), next)), deleted: false };
      }
      const gone = opts.dryRun ? current : this.store.remove(storageKey(t), ns, name)!;
      return { obj: this.present(t, gone), deleted: true };
    });
  }
}
