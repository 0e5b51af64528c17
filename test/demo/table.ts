// Plain-text tables for the demo's summary and the bench's results: a header, a rule, the rows;
// columns padded to the widest cell, numbers (and "-") right-aligned.

const numeric = /^[-+]?[\d.,]+\s*(%|x|ms|s|\/s|MiB)?$|^-$/;

export function formatTable(header: string[], rows: string[][], indent = "  "): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const right = header.map((_, i) => rows.length > 0 && rows.every((r) => numeric.test(r[i] ?? "-")));
  const line = (cells: string[]) =>
    indent +
    cells
      .map((c, i) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(header), indent + widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}
