// Is a process still there? For tests that check a run left nothing behind.
import { readdirSync, readFileSync } from "node:fs";

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie has exited; only its parent has not collected it yet.
  return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
}

/** Every "pid N" a run printed. */
export function pidsIn(text: string): number[] {
  return [...new Set([...text.matchAll(/\bpid (\d+)/g)].map((m) => Number(m[1])))];
}

/** Live processes whose command line mentions `text` (e.g. a run's working directory). */
export function processesMentioning(text: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(text) && alive(Number(entry))) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}
