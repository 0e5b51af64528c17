// Turns CSIAddonsNode changes and the clock into passes (DESIGN 7.2): a restart marker that is
// not handled yet → a pass over every volume of that node (ALWAYS, or IF_ABNORMAL on first
// sight), then the marker is recorded on the object; between restarts a jittered periodic
// IF_ABNORMAL pass per sidecar. A newer trigger for a node supersedes older work of that node.
// Only the leader acts; losing leadership drops all work, calls in flight included (the next leader
// reads the markers), and what it exported as the leader (connection states, abnormal volumes).
import type { Logger } from "../../common/log/logger.js";
import { delay } from "../../common/util/delay.js";
import type { ClusterView, KubeWrites } from "../kube/api.js";
import { KubeRequestError } from "../kube/api.js";
import { backoffMs, jittered } from "../plan/retry.js";
import { HANDLED_RESTART, decideRestart, restartTime, type RestartDecision, type RestartHealMode } from "../plan/trigger.js";
import type { SidecarInfo } from "../plan/types.js";
import type { Metrics, WaitingWork as Waiting } from "../report/metrics.js";
import { HealPass, type PassDeps, type PassSummary } from "./pass.js";

interface NodeState {
  pass?: HealPass;
  /** The restart marker the current pass handles. */
  activeMarker?: string;
  /** Marker handled by this process (written, or being written, to the object). */
  handledMarker?: string;
  timer?: NodeJS.Timeout;
}

export interface HealControllerDeps {
  view: ClusterView;
  kube: Pick<KubeWrites, "patchCSIAddonsNodeAnnotation">;
  pass: PassDeps;
  metrics: Metrics;
  logger: Logger;
  checkIntervalMs: number;
  /** `--restart-heal-mode`: what a restart gets (a reconnection or a first sight is only ever checked). */
  restartHealMode?: RestartHealMode;
  /** How often a restart heal that is still running logs its progress. */
  progressEveryMs?: number;
  random?: () => number;
}

/** Restart heals cut short by their object's deletion, remembered for when the sidecar makes it again. */
const MAX_CUT_SHORT = 1024;
/** Markers handled by this process, kept past their object's deletion. */
const MAX_HANDLED_HERE = 65_536;

export class HealController {
  private readonly nodes = new Map<string, NodeState>();
  /**
   * Sidecar key → the restart marker whose ALWAYS pass a deletion of the object cancelled. The
   * sidecar makes its object again (DESIGN 4.3) with the same restart marker but without our handled
   * marker, which would otherwise read as a first sight and get only a check: the mounts that
   * restart killed must still be healed with ALWAYS. (The upstream controller deletes a
   * CSIAddonsNode it cannot reach, e.g. while the driver restarts.)
   */
  private readonly cutShort = new Map<string, string>();
  /**
   * Sidecar key → the last marker this process handled. Our handled marker lives on the object and
   * is lost with it; the sidecar writes back the one it last saw (DESIGN 4.3), but a deletion right
   * after our write can come before its watch saw it. Kept across deletions and leadership, so that
   * such a restart is not healed ALWAYS twice.
   */
  private readonly handledHere = new Map<string, string>();
  /**
   * Sidecar key → the driver of a sidecar that is not healing (its driver does not offer VolumeHealer). Told once, not
   * per pass; while it holds, no periodic pass asks that sidecar again: what changes a driver's
   * capabilities is a new driver process, which records a restart and brings a restart pass.
   */
  private readonly notHealing = new Map<string, string>();
  private generation = 0;
  private leading = false;
  /** Aborted when leadership ends, so no retry's wait outlives it (a closed controller holds no timer). */
  private leadership = new AbortController();
  private closed = false;
  private readonly listener = (type: "add" | "update" | "delete", s: SidecarInfo) => this.onSidecar(type, s);

  constructor(private readonly deps: HealControllerDeps) {
    deps.view.on("sidecar", this.listener);
  }

  /** Leadership gained (or no election): act on every sidecar the caches know. */
  lead(): void {
    if (this.leading || this.closed) return;
    this.leading = true;
    this.leadership = new AbortController();
    this.deps.metrics.leader.set(1);
    // Every node's first periodic pass spread over one interval (the i-th of n at (i + U) / n of
    // it), not all within the same minute after a start or a failover.
    const all = this.deps.view.sidecars();
    const live = all.filter((s) => !s.deleting);
    const random = this.deps.random ?? Math.random;
    const firstIn = new Map(live.map((s, i) => [s.key, (this.deps.checkIntervalMs * (i + random())) / live.length]));
    for (const s of all) this.onSidecar("add", s, firstIn.get(s.key));
  }

  /** Heal work not answered yet, by trigger (restart work includes reconnections and first sights). */
  waiting(): Waiting[] {
    const by = new Map<string, Waiting>();
    const now = Date.now();
    for (const st of this.nodes.values()) {
      const p = st.pass;
      if (!p) continue;
      const w = by.get(p.spec.trigger) ?? { trigger: p.spec.trigger, volumes: 0, nodes: 0, oldestSeconds: 0 };
      w.volumes += p.unanswered;
      w.nodes++;
      w.oldestSeconds = Math.max(w.oldestSeconds, (now - p.startedAt) / 1000);
      by.set(p.spec.trigger, w);
    }
    return [...by.values()];
  }

  /** Leadership lost: cancel every pass, its calls in flight and every timer; a standby reports no leader's numbers. */
  unlead(): void {
    this.leading = false;
    this.leadership.abort();
    this.deps.metrics.leader.set(0);
    for (const st of this.nodes.values()) {
      st.pass?.cancel();
      clearTimeout(st.timer);
    }
    this.nodes.clear();
    this.cutShort.clear();
    this.notHealing.clear();
    this.deps.metrics.sidecarsNotHealing.reset();
    this.deps.pass.queue.clear();
    this.deps.pass.pool.close();
    this.deps.metrics.volumesAbnormal.reset();
  }

  /**
   * Shutdown: nothing new starts; calls in flight get up to `graceMs` to answer (their answers are
   * reported), then are cancelled. The caller releases leadership only after this, so that no other
   * replica heals while these calls may still run.
   */
  async close(graceMs = 0): Promise<void> {
    this.closed = true;
    this.deps.view.off("sidecar", this.listener);
    this.leading = false;
    this.leadership.abort();
    // Kept here: a stopped pass leaves its node's state at once, its calls in flight do not.
    const stopped: HealPass[] = [];
    for (const st of this.nodes.values()) {
      if (st.pass) stopped.push(st.pass);
      st.pass?.stop();
      clearTimeout(st.timer);
    }
    this.deps.pass.queue.clear();
    const graceOver = new AbortController();
    await Promise.race([this.deps.pass.queue.idle(), delay(graceMs, graceOver.signal)]);
    graceOver.abort();
    for (const pass of stopped) pass.cancel();
    this.unlead();
  }

  private state(key: string): NodeState {
    let st = this.nodes.get(key);
    if (!st) this.nodes.set(key, (st = {}));
    return st;
  }

  private onSidecar(type: "add" | "update" | "delete", s: SidecarInfo, firstCheckInMs?: number): void {
    if (!this.leading) return;
    if (type === "delete") {
      const st = this.nodes.get(s.key);
      if (st?.pass && st.activeMarker && st.pass.spec.mode === "ALWAYS") this.rememberCutShort(s.key, st.activeMarker);
      st?.pass?.cancel();
      clearTimeout(st?.timer);
      this.nodes.delete(s.key);
      this.deps.pass.pool.forget(s.key);
      this.noteHealer(s, undefined, true);
      // Else an alert on this node's abnormal volumes would never clear.
      this.deps.metrics.volumesAbnormal.remove({ driver: s.driver, node: s.nodeId });
      return;
    }
    const st = this.state(s.key);
    const handledHere = this.handledHere.get(s.key);
    let d = decideRestart(s, this.deps.restartHealMode, handledHere);
    if (!d && handledHere !== undefined && s.annotations[HANDLED_RESTART] !== handledHere && !s.deleting) {
      // Handled here before the object was made again: record it on the new one, heal nothing.
      st.handledMarker = handledHere;
      void this.writeMarker(s, handledHere, st);
    }
    const cut = this.cutShort.get(s.key);
    if (cut !== undefined && type === "add") {
      this.cutShort.delete(s.key);
      if (d?.trigger === "first-sight" && d.marker === cut)
        d = { ...d, trigger: "restart", mode: this.deps.restartHealMode === "if-abnormal" ? "IF_ABNORMAL" : "ALWAYS" };
    }
    if (d && d.marker !== st.handledMarker && d.marker !== st.activeMarker) this.restartPass(s, d, st);
    if (!st.timer && !s.deleting) this.schedulePeriodic(s.key, st, firstCheckInMs);
  }

  private rememberHandled(key: string, marker: string): void {
    this.handledHere.delete(key);
    if (this.handledHere.size >= MAX_HANDLED_HERE) this.handledHere.delete(this.handledHere.keys().next().value!);
    this.handledHere.set(key, marker);
  }

  private rememberCutShort(key: string, marker: string): void {
    this.cutShort.delete(key);
    if (this.cutShort.size >= MAX_CUT_SHORT) this.cutShort.delete(this.cutShort.keys().next().value!);
    this.cutShort.set(key, marker);
  }

  private restartPass(s: SidecarInfo, d: RestartDecision, st: NodeState): void {
    const seenAt = Date.now();
    const since = restartTime(s.annotations, s.annotations[HANDLED_RESTART], seenAt);
    const pass = this.startPass(s, d.trigger, d.mode, 0, st);
    st.activeMarker = d.marker;
    // Counted before the pass lists the node's Pods: the volumes of a driver without attach are not
    // in it yet (the done line's answers count every volume).
    this.deps.logger.info("restart heal", {
      sidecar: s.key,
      node: s.nodeId,
      driver: s.driver,
      trigger: d.trigger,
      mode: d.mode,
      marker: d.marker,
      attachable: pass.spec.pvs.length,
    });
    const progress = setInterval(() => {
      this.deps.logger.info("restart heal progress", {
        sidecar: s.key,
        node: s.nodeId,
        trigger: d.trigger,
        marker: d.marker,
        answered: pass.answered,
        waiting: pass.unanswered,
        seconds: Math.round((Date.now() - since) / 1000),
      });
    }, this.deps.progressEveryMs ?? 10_000);
    progress.unref();
    void pass.done.then(async (summary) => {
      clearInterval(progress);
      if (st.pass !== pass) return;
      st.pass = undefined;
      st.activeMarker = undefined;
      if (!summary.completed) return;
      st.handledMarker = d.marker;
      this.rememberHandled(s.key, d.marker);
      // Not opted in (told once by noteHealer): leave the object alone, no marker written.
      if (summary.skipped) return this.deps.logger.debug("restart heal skipped: the driver does not heal", { sidecar: s.key, marker: d.marker });
      if (summary.unchecked) {
        // Recorded all the same: the marker is what makes this sidecar's next restart an ALWAYS heal.
        this.deps.logger.info("first sight not checked", { sidecar: s.key, node: s.nodeId, marker: d.marker, reason: summary.unchecked });
        return this.writeMarker(s, d.marker, st);
      }
      if (d.trigger === "restart") this.deps.metrics.restartHealSeconds.observe({ driver: s.driver }, (Date.now() - since) / 1000);
      this.deps.logger.info("restart heal done", {
        sidecar: s.key,
        node: s.nodeId,
        marker: d.marker,
        answers: Object.fromEntries(countAnswers(summary)),
        seconds: (Date.now() - since) / 1000,
      });
      await this.writeMarker(s, d.marker, st);
    });
  }

  /** Records the handled marker with a merge patch of that one annotation; retried until it lands or is moot. */
  private async writeMarker(s: SidecarInfo, marker: string, st: NodeState): Promise<void> {
    for (let attempt = 1; this.leading && this.nodes.get(s.key) === st && st.handledMarker === marker; attempt++) {
      try {
        await this.deps.kube.patchCSIAddonsNodeAnnotation(s.namespace, s.name, HANDLED_RESTART, marker, AbortSignal.timeout(15_000));
        return;
      } catch (err) {
        if (err instanceof KubeRequestError && err.status === 404) return;
        const wait = backoffMs(attempt, 500, 30_000, this.deps.random);
        this.deps.logger.warn("could not record the handled restart; retrying", { sidecar: s.key, error: (err as Error).message, retryInMs: wait });
        await delay(wait, this.leadership.signal);
      }
    }
  }

  private startPass(s: SidecarInfo, trigger: HealPass["spec"]["trigger"], mode: HealPass["spec"]["mode"], priority: number, st: NodeState): HealPass {
    const generation = ++this.generation;
    this.deps.pass.queue.supersede(s.key, generation);
    st.pass?.cancel();
    // A first sight re-stages (ALWAYS) what an older node-plugin pod staged, unless restarts are only checked.
    const olderAlways = trigger === "first-sight" && this.deps.restartHealMode !== "if-abnormal";
    const pass = new HealPass(this.deps.pass, { sidecar: s, pvs: this.deps.view.volumesOf(s), mode, trigger, generation, priority, olderAlways });
    st.pass = pass;
    void pass.done.then((summary) => {
      if (!summary.completed || !this.leading || this.nodes.get(s.key) !== st) return;
      this.noteHealer(s, summary.skipped);
      if (summary.skipped || summary.unchecked) return;
      this.deps.metrics.volumesAbnormal.set({ driver: s.driver, node: s.nodeId }, summary.abnormal);
    });
    return pass.start();
  }

  /**
   * Whether the sidecar's driver heals (`skipped` undefined) or why not: told when it changes,
   * counted by driver; `gone`: its CSIAddonsNode was deleted, so it is only no longer counted.
   */
  private noteHealer(s: SidecarInfo, skipped: string | undefined, gone = false): void {
    const was = this.notHealing.get(s.key);
    if (skipped === undefined) {
      if (!was) return;
      this.notHealing.delete(s.key);
      if (!gone) this.deps.logger.info("driver offers VolumeHealer now; checking its volumes again", { sidecar: s.key, node: s.nodeId, driver: s.driver });
      const st = this.nodes.get(s.key);
      if (st && !st.timer && !s.deleting) this.schedulePeriodic(s.key, st);
    } else {
      // Told once: a restart pass and a periodic one word what is missing differently.
      if (was) return;
      this.notHealing.set(s.key, s.driver);
      this.deps.pass.reporter.notHealing(s, skipped);
    }
    for (const driver of new Set([s.driver, was ?? s.driver])) {
      const n = [...this.notHealing.values()].filter((d) => d === driver).length;
      this.deps.metrics.sidecarsNotHealing.set({ driver }, n);
    }
  }

  private schedulePeriodic(key: string, st: NodeState, inMs?: number): void {
    if (this.deps.checkIntervalMs <= 0 || this.notHealing.has(key)) return;
    st.timer = setTimeout(
      () => {
        st.timer = undefined;
        const s = this.deps.view.sidecar(key);
        if (!this.leading || this.nodes.get(key) !== st || !s || s.deleting) return;
        if (st.pass) return this.schedulePeriodic(key, st);
        this.deps.logger.debug("periodic check", { sidecar: key, node: s.nodeId });
        const pass = this.startPass(s, "periodic", "IF_ABNORMAL", 1, st);
        void pass.done.then(() => {
          if (st.pass === pass) st.pass = undefined;
          if (this.nodes.get(key) === st && !st.timer) this.schedulePeriodic(key, st);
        });
      },
      inMs ?? jittered(this.deps.checkIntervalMs, this.deps.random),
    );
    st.timer.unref();
  }
}

export function countAnswers(summary: PassSummary): Map<string, number> {
  const counts = new Map<string, number>();
  for (const a of summary.answers.values()) counts.set(a, (counts.get(a) ?? 0) + 1);
  return counts;
}
