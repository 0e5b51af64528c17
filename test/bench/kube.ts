// The parent's handle on kube-child.ts: start it, read and reset its request counters, stop it.
import { fork } from "node:child_process";
import { join } from "node:path";
import { repoRoot } from "../support/proc.js";
import type { FromChild, ToChild } from "./kube-child.js";

export interface KubeChild {
  readonly pid: number;
  readonly kubeconfig: string;
  /** Requests served since the last reset, by "verb resource". */
  counters(): Promise<Record<string, number>>;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

export async function startKubeChild(volumes: number): Promise<KubeChild> {
  const child = fork(join(repoRoot, "test/bench/kube-child.ts"), [String(volumes)], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const waiting = new Map<number, (m: FromChild) => void>();
  let nextId = 0;
  const ready = new Promise<{ kubeconfig: string }>((resolve, reject) => {
    child.on("message", (m: FromChild) => {
      if (m.type === "ready") resolve(m);
      else waiting.get(m.id)?.(m);
    });
    void exited.then(() => reject(new Error("the in-memory Kubernetes API process exited")));
  });
  const ask = (type: ToChild["type"]) =>
    new Promise<FromChild>((resolve, reject) => {
      const id = ++nextId;
      waiting.set(id, (m) => (waiting.delete(id), resolve(m)));
      child.send({ id, type } satisfies ToChild, (err) => err && reject(err));
    });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  try {
    const { kubeconfig } = await ready;
    return {
      pid: child.pid!,
      kubeconfig,
      counters: async () => ((await ask("counters")) as Extract<FromChild, { type: "counters" }>).counters,
      reset: async () => void (await ask("reset")),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
