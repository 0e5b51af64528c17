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

/** The controller's heal decisions (log lines naming pv, trigger, mode and result), oldest first. */
export function decisions(lines: readonly LogLine[], since = 0): Decision[] {
  const out: Decision[] = [];
  for (const l of lines) {
    const { pv, trigger, mode, result } = l as Record<string, unknown>;
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

/** Sum of every sample of a metric family whose labels contain all of `labels` (0 when absent). */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = m[2] ?? "";
    if (Object.entries(labels).every(([k, v]) => have.includes(`${k}="${v}"`))) total += Number(m[3]);
  }
  return total;
}

/** Metric family names in a /metrics text that match `pattern`. */
export function metricNames(text: string, pattern: RegExp): string[] {
  return [...new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!).filter((n) => pattern.test(n)))];
}
