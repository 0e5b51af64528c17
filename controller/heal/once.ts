// `csi-addons-healer-controller heal --node N [--pv P] [--mode …]`: one pass over a node's
// volumes from a terminal, with a progress line and a summary table. Writes no marker.
import type { HealCommand } from "../config/config.js";
import type { ClusterView } from "../kube/api.js";
import type { PvInfo } from "../plan/types.js";
import { withVolumes } from "../plan/volumes.js";
import { HealPass, type PassDeps } from "./pass.js";

export interface Terminal {
  /** One progress line (replaces the previous one on a TTY). */
  progress(line: string): void;
  print(text: string): void;
}

const OK = new Set(["HEALED", "NOT_NEEDED"]);

/** Exit code: 0 when every volume answered HEALED or NOT_NEEDED. */
export async function healOnce(view: ClusterView, deps: PassDeps, cmd: HealCommand, term: Terminal, deadlineMs: number): Promise<number> {
  const sidecars = view.sidecars().filter((s) => s.nodeId === cmd.node && !s.deleting);
  if (sidecars.length === 0) {
    term.print(`no CSIAddonsNode for node ${cmd.node}\n`);
    return 1;
  }
  // The node's Pods are listed here, once, so that the table counts every volume up front.
  const work = await Promise.all(
    sidecars.map(async (s) => {
      let more: readonly PvInfo[] = [];
      try {
        if (deps.podVolumes) more = await deps.podVolumes(s, AbortSignal.timeout(deadlineMs));
      } catch (err) {
        term.print(`${s.key}: could not list the Pods on node ${cmd.node} (${(err as Error).message}): volumes of a driver without attach are left out\n`);
      }
      return { s, pvs: withVolumes(view.volumesOf(s), more).filter((pv) => !cmd.pv || pv.name === cmd.pv) };
    }),
  );
  const passDeps: PassDeps = { ...deps, podVolumes: undefined };
  const total = work.reduce((n, w) => n + w.pvs.length, 0);
  if (total === 0) {
    term.print(cmd.pv ? `PersistentVolume ${cmd.pv} is not on node ${cmd.node}\n` : `no volumes on node ${cmd.node}\n`);
    return cmd.pv ? 1 : 0;
  }
  const mode = cmd.mode === "always" ? "ALWAYS" : "IF_ABNORMAL";
  let answered = 0;
  const rows: { pv: PvInfo; driver: string; answer: string }[] = [];
  const passes = work.map(({ s, pvs }, i) =>
    new HealPass(passDeps, { sidecar: s, pvs, mode, trigger: "manual", generation: i, priority: 0 }, (pv, answer) => {
      answered++;
      rows.push({ pv: pvs.find((p) => p.name === pv)!, driver: s.driver, answer });
      term.progress(`[${answered}/${total}] ${pv}: ${answer}`);
    }).start(),
  );
  const timer = setTimeout(() => passes.forEach((p) => p.cancel()), deadlineMs);
  const summaries = await Promise.all(passes.map((p) => p.done));
  clearTimeout(timer);
  const notes: string[] = [];
  summaries.forEach((sum, i) => {
    const { s, pvs } = work[i]!;
    if (sum.skipped) notes.push(`${s.key}: skipped: ${sum.skipped}`);
    for (const pv of pvs) if (!sum.answers.has(pv.name)) rows.push({ pv, driver: s.driver, answer: sum.skipped ? "SKIPPED" : "NO_ANSWER" });
  });
  rows.sort((a, b) => a.pv.name.localeCompare(b.pv.name));
  term.print(
    table(
      ["PV", "DRIVER", "VOLUME HANDLE", "RESULT"],
      rows.map((r) => [r.pv.name, r.driver, r.pv.handle, r.answer]),
    ),
  );
  const counts = new Map<string, number>();
  for (const r of rows) counts.set(r.answer, (counts.get(r.answer) ?? 0) + 1);
  term.print(`${[...counts].map(([k, n]) => `${k} ${n}`).join(", ")} (mode ${mode}, node ${cmd.node})\n${notes.map((n) => n + "\n").join("")}`);
  return rows.every((r) => OK.has(r.answer)) ? 0 : 1;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd() + "\n";
  return line(header) + rows.map(line).join("");
}
