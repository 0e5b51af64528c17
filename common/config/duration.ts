// Go time.ParseDuration subset ("3m", "1m30s", "250ms", "2h"), since kubernetes-csi sidecars take
// durations that way and operators copy flags between them.
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds, or undefined when `text` is not a duration. */
export function parseDuration(text: string): number | undefined {
  if (text === "0") return 0;
  // µ escaped: one non-ASCII character in the bundle makes Node hold that whole file's source as a
  // two-byte string (twice the heap; scripts/bundle.mjs refuses it).
  const re = /(\d+(?:\.\d+)?)(ns|us|\u00b5s|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    matched = re.lastIndex;
  }
  return matched === text.length && matched > 0 ? total : undefined;
}
