// ClusterView over four informers (DESIGN 7.1): CSIAddonsNodes, VolumeAttachments, PVs indexed by
// (driver, volumeHandle) and by claim, Nodes. Pods are never cached: an endpoint is resolved with
// one GET, and a node's Pods are listed once per pass (heal/pass.ts).
import { EventEmitter } from "node:events";
import {
  CoreV1Api,
  CustomObjectsApi,
  StorageV1Api,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1Node,
  type V1PersistentVolume,
  type V1VolumeAttachment,
} from "@kubernetes/client-node";
import type { Logger } from "../../common/log/logger.js";
import { claimKey, claimRefHolds } from "../../common/kube/pod-claims.js";
import { volumesOfClaims, volumesOfSidecar } from "../plan/volumes.js";
import type { AttachmentInfo, PvInfo, SidecarInfo } from "../plan/types.js";
import type { ClusterEvents, ClusterView } from "./api.js";
import { AttachmentIndex } from "./attachment-index.js";
import { requestOptions } from "./client.js";
import { Informer } from "./informer.js";
import type { PageFn } from "./paged-list.js";
import { slimAttachment, slimNode, slimPv } from "./slim.js";

interface CSIAddonsNode extends KubernetesObject {
  spec?: { driver?: { name?: string; endpoint?: string; nodeID?: string } };
}

const key = (namespace: string, name: string) => `${namespace}/${name}`;
const handleKey = (driver: string, handle: string) => `${driver}^${handle}`;

function index(idx: Map<string, Map<string, PvInfo>>, k: string, pv: PvInfo): void {
  const same = idx.get(k) ?? new Map<string, PvInfo>();
  idx.set(k, same.set(pv.name, pv));
}

function unindex(idx: Map<string, Map<string, PvInfo>>, k: string, name: string): void {
  const same = idx.get(k);
  same?.delete(name);
  if (same?.size === 0) idx.delete(k);
}

export function toSidecar(o: CSIAddonsNode): SidecarInfo {
  const m = o.metadata ?? {};
  const d = o.spec?.driver ?? {};
  return {
    key: key(m.namespace ?? "", m.name ?? ""),
    namespace: m.namespace ?? "",
    name: m.name ?? "",
    uid: m.uid ?? "",
    driver: d.name ?? "",
    endpoint: d.endpoint ?? "",
    nodeId: d.nodeID ?? "",
    annotations: m.annotations ?? {},
    owners: (m.ownerReferences ?? []).map((o) => ({ kind: o.kind, name: o.name, uid: o.uid, ...(o.controller ? { controller: true } : {}) })),
    deleting: Boolean(m.deletionTimestamp),
  };
}

export function toPv(o: V1PersistentVolume): PvInfo | undefined {
  const csi = o.spec?.csi;
  if (!csi || !o.metadata?.name) return undefined;
  const c = o.spec?.claimRef;
  return {
    name: o.metadata.name,
    uid: o.metadata.uid ?? "",
    driver: csi.driver,
    handle: csi.volumeHandle,
    deleting: Boolean(o.metadata.deletionTimestamp),
    claim: c?.name && c.namespace ? { namespace: c.namespace, name: c.name, uid: c.uid } : undefined,
  };
}

export function toAttachment(o: V1VolumeAttachment): AttachmentInfo {
  const created = o.metadata?.creationTimestamp;
  const since = created === undefined ? undefined : new Date(created).getTime();
  return {
    attacher: o.spec.attacher,
    nodeName: o.spec.nodeName,
    pvName: o.spec.source.persistentVolumeName,
    attached: o.status?.attached === true,
    since: Number.isFinite(since) ? since : undefined,
  };
}

/** The PersistentVolume informer: paged lists with the request options of client.ts, slim objects cached. */
export function pvInformer(kc: KubeConfig, logger: Logger): Informer<V1PersistentVolume> {
  const core = kc.makeApiClient(CoreV1Api);
  return new Informer(kc, "/api/v1/persistentvolumes", (p, signal) => core.listPersistentVolume(p, requestOptions(signal)), logger, slimPv);
}

export class ClusterCache extends EventEmitter<ClusterEvents> implements ClusterView {
  private readonly nodesInf: Informer<CSIAddonsNode>;
  private readonly vaInf: Informer<V1VolumeAttachment>;
  private readonly pvInf: Informer<V1PersistentVolume>;
  private readonly k8sNodeInf: Informer<V1Node>;
  // Several PVs may name one volume handle (a static PV made again while the old one is still being
  // deleted, or one share bound in several namespaces): each is kept, so that deleting one leaves
  // the others found.
  private readonly pvByHandleIdx = new Map<string, Map<string, PvInfo>>();
  private readonly pvByNameIdx = new Map<string, PvInfo>();
  /** "namespace/claim" → the PVs whose claimRef names it (one, unless a PV is being replaced). */
  private readonly pvByClaimIdx = new Map<string, Map<string, PvInfo>>();
  private readonly attachments = new AttachmentIndex();

  constructor(kc: KubeConfig, namespace: string | undefined, logger: Logger) {
    super();
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    const storage = kc.makeApiClient(StorageV1Api);
    const group = "csiaddons.openshift.io";
    const version = "v1alpha1";
    const plural = "csiaddonsnodes";
    // Each page with the request deadline and pooled connection of every other request (client.ts).
    const listNodes: PageFn<CSIAddonsNode> = (page, signal) =>
      (namespace
        ? custom.listNamespacedCustomObject({ group, version, plural, namespace, ...page }, requestOptions(signal))
        : custom.listClusterCustomObject({ group, version, plural, ...page }, requestOptions(signal))) as Promise<KubernetesListObject<CSIAddonsNode>>;
    const nodesPath = namespace ? `/apis/${group}/${version}/namespaces/${namespace}/${plural}` : `/apis/${group}/${version}/${plural}`;
    this.nodesInf = new Informer(kc, nodesPath, listNodes, logger);
    this.vaInf = new Informer(
      kc,
      "/apis/storage.k8s.io/v1/volumeattachments",
      (p, signal) => storage.listVolumeAttachment(p, requestOptions(signal)),
      logger,
      slimAttachment,
    );
    this.pvInf = pvInformer(kc, logger);
    this.k8sNodeInf = new Informer(kc, "/api/v1/nodes", (p, signal) => core.listNode(p, requestOptions(signal)), logger, slimNode);

    this.pvInf.on("change", (type, o) => {
      const name = o.metadata?.name ?? "";
      const old = this.pvByNameIdx.get(name);
      if (old) {
        unindex(this.pvByHandleIdx, handleKey(old.driver, old.handle), name);
        if (old.claim) unindex(this.pvByClaimIdx, claimKey(old.claim.namespace, old.claim.name), name);
      }
      this.pvByNameIdx.delete(name);
      const pv = type === "delete" ? undefined : toPv(o);
      if (pv) {
        this.pvByNameIdx.set(pv.name, pv);
        index(this.pvByHandleIdx, handleKey(pv.driver, pv.handle), pv);
        if (pv.claim && claimRefHolds(o.status?.phase)) index(this.pvByClaimIdx, claimKey(pv.claim.namespace, pv.claim.name), pv);
      }
    });
    this.vaInf.on("change", (type, o) => {
      const name = o.metadata?.name ?? "";
      if (type === "delete") this.attachments.delete(name);
      else this.attachments.set(name, toAttachment(o));
    });
    this.nodesInf.on("change", (type, o) => this.emit("sidecar", type, toSidecar(o)));
  }

  /** Volumes and nodes first, so the first CSIAddonsNode events see complete indexes. */
  async start(): Promise<void> {
    await Promise.all([this.vaInf.start(), this.pvInf.start(), this.k8sNodeInf.start()]);
    await this.nodesInf.start();
  }

  stop(): void {
    for (const i of [this.nodesInf, this.vaInf, this.pvInf, this.k8sNodeInf]) i.stop();
  }

  sidecars(): SidecarInfo[] {
    return this.nodesInf.list().map(toSidecar);
  }

  sidecar(k: string): SidecarInfo | undefined {
    const [namespace, name] = k.split("/");
    const o = this.nodesInf.get(name!, namespace);
    return o ? toSidecar(o) : undefined;
  }

  volumesOf(s: SidecarInfo): PvInfo[] {
    return volumesOfSidecar(s, {
      attachments: this.attachments.onNode(s.nodeId),
      volumesInUse: this.k8sNodeInf.get(s.nodeId)?.status?.volumesInUse ?? [],
      pvByName: (n) => this.pvByNameIdx.get(n),
      pvsByHandle: (d, h) => this.pvByHandleIdx.get(handleKey(d, h))?.values() ?? [],
    });
  }

  attachedSince(s: SidecarInfo): Map<string, number> {
    const since = new Map<string, number>();
    for (const va of this.attachments.onNode(s.nodeId)) {
      if (va.attacher === s.driver && va.pvName && va.since !== undefined) since.set(va.pvName, va.since);
    }
    return since;
  }

  volumesOfClaims(s: SidecarInfo, claims: Iterable<string>): PvInfo[] {
    return volumesOfClaims(s, claims, {
      attachments: this.attachments.onNode(s.nodeId),
      pvsByClaim: (c) => this.pvByClaimIdx.get(c)?.values() ?? [],
    });
  }

  pv(name: string): PvInfo | undefined {
    return this.pvByNameIdx.get(name);
  }
}
