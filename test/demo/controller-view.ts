// What the demo reads about the healer controller's work, from the outside: its heal decisions
// (one JSON log line each), its Events in the API, and its Prometheus metrics.
import type { LogLine } from "./logged-process.js";

export interface Decision {
  at: number;
  pv: string;
  trigger: string;
  mode: string;
  result: string;
}

/**
 * The controller's final heal decisions (its "heal" log lines naming pv, trigger, mode and
 * result; attempts it will retry carry retryInMs and are left out), oldest first.
 */
export function decisions(lines: readonly LogLine[], since = 0): Decision[] {
  const out: Decision[] = [];
  for (const l of lines) {
    const { pv, trigger, mode, result, retryInMs } = l as Record<string, unknown>;
    if (l.message !== "heal" || retryInMs !== undefined) continue;
    if (typeof pv !== "string" || typeof trigger !== "string" || typeof mode !== "string" || typeof result !== "string") continue;
    const at = Date.parse(l.timestamp);
    if (at >= since) out.push({ at, pv, trigger, mode, result });
  }
  return out;
}

/** The last decision per PV. */
export function lastByPv(ds: readonly Decision[]): Map<string, Decision> {
  return new Map(ds.map((d) => [d.pv, d]));
}

interface EventLike {
  reason?: string;
  message?: string;
  note?: string;
  count?: number;
  series?: { count?: number };
  involvedObject?: { kind?: string; name?: string };
  regarding?: { kind?: string; name?: string };
}

/** Events about one object (core/v1 or events.k8s.io/v1 shape), reason and text. */
export function eventsAbout(events: readonly object[], kind: string, name: string): { reason: string; text: string; count: number }[] {
  return (events as EventLike[])
    .filter((e) => {
      const about = e.regarding ?? e.involvedObject;
      return about?.kind === kind && about.name === name;
    })
    .map((e) => ({ reason: e.reason ?? "", text: e.note ?? e.message ?? "", count: e.series?.count ?? e.count ?? 1 }));
}

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

/** The samples of one metric (exact name, e.g. "x_total" or "x_seconds_sum") in a /metrics text. */
export function samples(text: string, name: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    out.push({ labels, value: Number(m[3]) });
  }
  return out;
}

/** Sum of the samples whose labels include all of `labels` (0 when there are none). */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  return samples(text, name)
    .filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((n, s) => n + s.value, 0);
}
