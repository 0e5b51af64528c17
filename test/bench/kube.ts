// The parent's handle on kube-child.ts: start it, read and reset its request counters, stop it.
import { forkIpc } from "./ipc-child.js";
import type { ChildSpec, Counts, FromChild, ToChild } from "./kube-child.js";
import type { PodReplacement } from "./cluster-seed.js";
import type { Fleet } from "./fleet.js";

export interface KubeChild {
  readonly pid: number;
  readonly kubeconfig: string;
  /** Kubeconfigs of the spec's extra identities, by name. */
  readonly kubeconfigs: Record<string, string>;
  /** Requests served since the last reset, by "verb resource". */
  counters(): Promise<Record<string, number>>;
  /** The same, and per username. */
  countsByUser(): Promise<Counts>;
  reset(): Promise<void>;
  /** Every object of a kind, read directly (not counted as a request). */
  list(apiVersion: string, kind: string): Promise<object[]>;
  /** Each node's node-plugin Pod replaced by a new one, as a DaemonSet upgrade does (cluster seed only). */
  replacePods(nodes: number[]): Promise<PodReplacement[]>;
  /** Starts changing the fleet's PVs outside `skipNodes`, `perSecond` a second (0: stops); the changes made by the previous churn. */
  churn(perSecond: number, skipNodes: number[], fleet: Fleet): Promise<number>;
  stop(): Promise<void>;
}

/** How many requests `counts` holds, of the "verb resource" keys `keep` accepts (all by default). */
export function requestTotal(counts: Record<string, number>, keep: (key: string) => boolean = () => true): number {
  return Object.entries(counts).reduce((n, [k, v]) => (keep(k) ? n + v : n), 0);
}

export async function startKubeChild(spec: ChildSpec): Promise<KubeChild> {
  const child = await forkIpc<ToChild, FromChild>("test/bench/kube-child.ts", spec, "the in-memory Kubernetes API process");
  const { kubeconfig, kubeconfigs } = child.ready;
  type Answer<T extends FromChild["type"]> = Extract<FromChild, { type: T }>;
  const counts = async () => (await child.ask<Answer<"counters">>({ type: "counters" })).counters;
  return {
    pid: child.pid,
    kubeconfig,
    kubeconfigs,
    counters: async () => (await counts()).total,
    countsByUser: counts,
    reset: async () => void (await child.ask({ type: "reset" })),
    list: async (apiVersion, kind) => (await child.ask<Answer<"list">>({ type: "list", apiVersion, kind })).objects,
    replacePods: async (nodes) => (await child.ask<Answer<"replacePods">>({ type: "replacePods", nodes })).pods,
    churn: async (perSecond, skipNodes, fleet) => (await child.ask<Answer<"churn">>({ type: "churn", perSecond, skipNodes, fleet })).changes,
    stop: () => child.stop(),
  };
}
