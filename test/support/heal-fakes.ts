// Fakes of the sidecar connection and pool for the heal/ tests (pass, controller, once): a sidecar
// that answers each HealVolume as told, calls held until released, the pass's dependencies.
import { status } from "@grpc/grpc-js";
import { WorkQueue } from "../../controller/heal/queue.js";
import { HealPass, type PassDeps } from "../../controller/heal/pass.js";
import { CallError } from "../../common/grpc/call-error.js";
import type { HealAnswer, SidecarConnection } from "../../controller/sidecars/connection.js";
import { SidecarPool } from "../../controller/sidecars/pool.js";
import { type HealOutcome } from "../../controller/report/reporter.js";
import type { PvInfo, SidecarInfo, Trigger } from "../../controller/plan/types.js";
import { createLogger } from "../../common/log/logger.js";
import { CREATED_BY_POD_UID, HANDLED_RESTART } from "../../controller/plan/trigger.js";
import { within } from "./wait.js";

// ---- one pass ----------------------------------------------------------------------------------

export const SIDECAR: SidecarInfo = {
  key: "csi/n1",
  namespace: "csi",
  name: "n1",
  uid: "u",
  driver: "drv",
  endpoint: "127.0.0.1:1",
  nodeId: "n1",
  annotations: {},
  owners: [],
  deleting: false,
};

export const PVS: PvInfo[] = ["pv-1", "pv-2"].map((name) => ({
  name,
  uid: name,
  driver: "drv",
  handle: `h-${name}`,
  deleting: false,
  claim: undefined,
}));

export interface Fake {
  deps: PassDeps;
  calls: string[];
  /** Each heal as sent: its PV, mode and reason. */
  sent: { pv: string; mode: string; reason: string }[];
  /** The signal each HealVolume was given, in call order. */
  signals: (AbortSignal | undefined)[];
  outcomes: HealOutcome[];
  /** What the reporter was told of sidecars whose driver does not heal. */
  notHealing: { sidecar: string; reason: string }[];
  /** How often the sidecar was looked up (pool.resolve). */
  resolves: () => number;
}

/** `answers(pv, n)` answers the n-th HealVolume for pv (1-based): a HealAnswer or a status code to fail with. */
export function fake(
  answers: (pv: string, n: number) => HealAnswer | status,
  o: {
    caps?: { healVolume: boolean; getVolumeHealth: boolean } | (() => { healVolume: boolean; getVolumeHealth: boolean });
    serving?: () => boolean;
    retry?: Partial<PassDeps["retry"]>;
    /** Awaited before a HealVolume is answered, to keep it in flight. */
    hold?: (pv: string) => Promise<void>;
    queue?: WorkQueue;
  } = {},
): Fake {
  let resolves = 0;
  const calls: string[] = [];
  /** Each heal as sent: its PV, mode and reason. */
  const sent: { pv: string; mode: string; reason: string }[] = [];
  const signals: (AbortSignal | undefined)[] = [];
  const outcomes: HealOutcome[] = [];
  const notHealing: { sidecar: string; reason: string }[] = [];
  const conn = {
    address: "fake",
    health: async () => ((o.serving ? o.serving() : true) ? { state: "serving" } : { state: "not_serving", reason: "NOT_SERVING" }),
    capabilities: async () => (typeof o.caps === "function" ? o.caps() : (o.caps ?? { healVolume: true, getVolumeHealth: true })),
    heal: (async (pv, mode, reason, _timeoutMs, signal) => {
      calls.push(pv);
      sent.push({ pv, mode, reason });
      signals.push(signal);
      if (o.hold) await cancellable(o.hold(pv), signal);
      const a = answers(pv, calls.filter((c) => c === pv).length);
      if (typeof a === "number") throw new CallError(a, "fake");
      return a;
    }) satisfies SidecarConnection["heal"],
  };
  // A real pool (connection states, forget, close) whose every lookup finds the fake connection.
  const pool = new SidecarPool({ sidecarPod: () => Promise.reject(new Error("the fakes never read a Pod")) }, {}, () => undefined);
  pool.resolve = async () => (resolves++, conn as unknown as SidecarConnection);
  const deps: PassDeps = {
    queue: o.queue ?? new WorkQueue({ perNode: 4, global: 4 }),
    pool,
    latest: () => SIDECAR,
    reporter: {
      outcome: (x: HealOutcome) => outcomes.push(x),
      notHealing: (sidecar: SidecarInfo, reason: string) => notHealing.push({ sidecar: sidecar.key, reason }),
    } as unknown as PassDeps["reporter"],
    logger: createLogger("error", "json"),
    retry: {
      maxAttempts: 3,
      initialMs: 1,
      maxMs: 5,
      healTimeoutMs: 1000,
      ...o.retry,
    },
  };
  return { deps, calls, sent, signals, outcomes, notHealing, resolves: () => resolves };
}

/** A held call ends as grpc-js ends a call whose signal aborts: CANCELLED. */
export function cancellable(held: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return held;
  return new Promise((resolve, reject) => {
    const cancelled = () => reject(new CallError(status.CANCELLED, "Cancelled on client"));
    if (signal.aborted) return cancelled();
    signal.addEventListener("abort", cancelled, { once: true });
    held.then(resolve, reject);
  });
}

export const NEVER = () => new Promise<void>(() => {});

export const HEALED: HealAnswer = {
  result: "HEALED",
  health: "HEALTHY",
  message: "",
  pods: [],
};

/** One pass over PVS, to its end: a pass that never ends fails the test at a deadline instead of hanging it. */
export const run = (f: Fake, trigger: Trigger = "restart") =>
  within(
    "the pass to end",
    new HealPass(f.deps, {
      sidecar: SIDECAR,
      pvs: PVS,
      mode: trigger === "restart" ? "ALWAYS" : "IF_ABNORMAL",
      trigger,
      generation: 1,
      priority: 0,
    }).start().done,
  );

export const HANDLED = {
  [CREATED_BY_POD_UID]: "pod-1",
  [HANDLED_RESTART]: "pod-1+",
};

export const other = (n: number, annotations: Record<string, string> = HANDLED): SidecarInfo => ({
  ...SIDECAR,
  key: `csi/n${n}`,
  name: `n${n}`,
  nodeId: `n${n}`,
  annotations,
});
