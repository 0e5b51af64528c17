// A bench helper in a process of its own (the in-memory API, the simulated sidecars), forked
// through tsx and spoken to over fork()'s IPC channel: it sends one { type: "ready" } message, then
// answers each request with a message carrying the request's id. A request the process can no
// longer answer (it exited) fails rather than waiting forever.
import { fork } from "node:child_process";
import { join } from "node:path";
import { repoRoot } from "../support/proc.js";

export type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

export interface IpcChild<To extends { id: number }, From extends { type: string }> {
  readonly pid: number;
  /** Its ready message. */
  readonly ready: Extract<From, { type: "ready" }>;
  /** Sends a request; resolves with the answer of the same id. */
  ask<A extends From>(m: DistributiveOmit<To, "id">): Promise<A>;
  /** SIGTERM, and the process's exit waited for. */
  stop(): Promise<void>;
}

export async function forkIpc<To extends { id: number }, From extends { type: string; id?: number }>(
  script: string,
  arg: unknown,
  what: string,
): Promise<IpcChild<To, From>> {
  const child = fork(join(repoRoot, script), [JSON.stringify(arg)], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const gone = exited.then(() => Promise.reject(new Error(`${what} exited`)));
  gone.catch(() => {}); // observed by whoever waits on it
  const waiting = new Map<number, (m: From) => void>();
  let nextId = 0;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  try {
    const ready = await Promise.race([
      new Promise<Extract<From, { type: "ready" }>>((resolve) =>
        child.on("message", (m: From) => (m.type === "ready" ? resolve(m as Extract<From, { type: "ready" }>) : waiting.get(m.id!)?.(m))),
      ),
      gone,
    ]);
    const ask = <A extends From>(m: DistributiveOmit<To, "id">) =>
      Promise.race([
        new Promise<A>((resolve, reject) => {
          const id = ++nextId;
          waiting.set(id, (answer) => (waiting.delete(id), resolve(answer as A)));
          child.send({ ...m, id }, (err) => err && reject(err));
        }),
        gone,
      ]);
    return { pid: child.pid!, ready, ask, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
