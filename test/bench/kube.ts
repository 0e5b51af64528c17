// The parent's handle on kube-child.ts: start it, read and reset its request counters, stop it.
import { fork } from "node:child_process";
import { join } from "node:path";
import { repoRoot } from "../support/proc.js";
import type { ChildSpec, Counts, FromChild, ToChild } from "./kube-child.js";
import type { PodReplacement } from "./cluster-seed.js";
import type { Fleet } from "./fleet.js";

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

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
  const child = fork(join(repoRoot, "test/bench/kube-child.ts"), [JSON.stringify(spec)], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const waiting = new Map<number, (m: FromChild) => void>();
  let nextId = 0;
  const ready = new Promise<Extract<FromChild, { type: "ready" }>>((resolve, reject) => {
    child.on("message", (m: FromChild) => {
      if (m.type === "ready") resolve(m);
      else waiting.get(m.id)?.(m);
    });
    void exited.then(() => reject(new Error("the in-memory Kubernetes API process exited")));
  });
  const ask = (m: DistributiveOmit<ToChild, "id">) =>
    new Promise<FromChild>((resolve, reject) => {
      const id = ++nextId;
      waiting.set(id, (answer) => (waiting.delete(id), resolve(answer)));
      child.send({ id, ...m } as ToChild, (err) => err && reject(err));
    });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  try {
    const { kubeconfig, kubeconfigs } = await ready;
    const counts = async () => ((await ask({ type: "counters" })) as Extract<FromChild, { type: "counters" }>).counters;
    return {
      pid: child.pid!,
      kubeconfig,
      kubeconfigs,
      counters: async () => (await counts()).total,
      countsByUser: counts,
      reset: async () => void (await ask({ type: "reset" })),
      list: async (apiVersion, kind) => ((await ask({ type: "list", apiVersion, kind })) as Extract<FromChild, { type: "list" }>).objects,
      replacePods: async (nodes) => ((await ask({ type: "replacePods", nodes })) as Extract<FromChild, { type: "replacePods" }>).pods,
      churn: async (perSecond, skipNodes, fleet) => ((await ask({ type: "churn", perSecond, skipNodes, fleet })) as Extract<FromChild, { type: "churn" }>).changes,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
