// Kubernetes Events on the PV and its bound PVC (DESIGN 7.4). A repeat of the same event (same
// object, reason and message) bumps the count of the one already sent instead of flooding.
import type { Logger } from "../../common/log/logger.js";
import type { EventRecord, KubeWrites } from "../kube/api.js";
import type { PvInfo } from "../plan/types.js";

/** Namespace of events about cluster-scoped objects (what kubectl describe pv looks in). */
const CLUSTER_EVENTS_NAMESPACE = "default";
const REMEMBERED = 4096;
const TIMEOUT_MS = 10_000;

export class EventRecorder {
  private readonly sent = new Map<string, { namespace: string; name: string; count: number }>();

  constructor(
    private readonly kube: Pick<KubeWrites, "createEvent" | "bumpEvent">,
    private readonly logger: Logger,
  ) {}

  /** On the PV and, when bound, on its claim. Never throws: a lost event must not stop healing. */
  async volume(pv: PvInfo, type: EventRecord["type"], reason: string, message: string): Promise<void> {
    const targets: EventRecord["involved"][] = [{ kind: "PersistentVolume", apiVersion: "v1", namespace: undefined, name: pv.name, uid: pv.uid }];
    if (pv.claim) targets.push({ kind: "PersistentVolumeClaim", apiVersion: "v1", namespace: pv.claim.namespace, name: pv.claim.name, uid: pv.claim.uid });
    await Promise.all(targets.map((involved) => this.record({ involved, type, reason, message })));
  }

  private async record(e: EventRecord): Promise<void> {
    const namespace = e.involved.namespace ?? CLUSTER_EVENTS_NAMESPACE;
    const key = `${e.involved.kind}\0${namespace}\0${e.involved.name}\0${e.involved.uid}\0${e.reason}\0${e.message}`;
    const signal = AbortSignal.timeout(TIMEOUT_MS);
    try {
      const prev = this.sent.get(key);
      if (prev) {
        prev.count++;
        try {
          await this.kube.bumpEvent(prev.namespace, prev.name, prev.count, signal);
          return;
        } catch {
          // Expired or deleted by the API server: start a new one.
        }
      }
      const name = await this.kube.createEvent(namespace, e, signal);
      this.remember(key, { namespace, name, count: 1 });
    } catch (err) {
      this.logger.warn("could not record event", { reason: e.reason, object: `${e.involved.kind}/${e.involved.name}`, error: (err as Error).message });
    }
  }

  private remember(key: string, v: { namespace: string; name: string; count: number }): void {
    this.sent.delete(key);
    this.sent.set(key, v);
    if (this.sent.size > REMEMBERED) this.sent.delete(this.sent.keys().next().value!);
  }
}
