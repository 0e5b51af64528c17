// A process's memory as the kernel sees it (/proc/<pid>/status): resident set now (VmRSS) and
// its high-water mark over the process's life (VmHWM), sampled while something runs; and its CPU time.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

export interface Memory {
  rssBytes: number;
  hwmBytes: number;
}

export function readMemory(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
    if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
    return Number(m[1]) * 1024;
  };
  return { rssBytes: kib("VmRSS"), hwmBytes: kib("VmHWM") };
}

/** Samples VmRSS every `everyMs` until stop(); stop() returns the largest sample and VmHWM. */
export function sampleMemory(pid: number, everyMs = 5): { stop(): { peakRssBytes: number; hwmBytes: number; samples: number } } {
  let peak = readMemory(pid).rssBytes;
  let samples = 1;
  const timer = setInterval(() => {
    peak = Math.max(peak, readMemory(pid).rssBytes);
    samples++;
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      const now = readMemory(pid);
      return { peakRssBytes: Math.max(peak, now.rssBytes), hwmBytes: now.hwmBytes, samples: samples + 1 };
    },
  };
}

export const mib = (bytes: number) => bytes / (1024 * 1024);

let ticksPerSecond: number | undefined;

/** CPU time (user + system) a process has used so far, in ms, from /proc/<pid>/stat. */
export function readCpuMs(pid: number): number {
  ticksPerSecond ??= Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) in parentheses: utime is the 14th field, stime the 15th.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(rest[11]) + Number(rest[12])) * 1000) / ticksPerSecond;
}
