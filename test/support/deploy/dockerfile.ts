// The Dockerfile read as stages of instructions: for the tests that check it, and for the test that
// assembles the sidecar image's files with the build stage's own commands.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../proc.js";

export interface Instruction {
  op: string;
  args: string;
}
export interface Stage {
  from: string;
  name?: string;
  steps: Instruction[];
}

/** Dockerfile instructions by stage: comments dropped, continuation lines joined. */
export function readStages(text: string): Stage[] {
  const lines = text.split("\n").filter((l) => !/^\s*#/.test(l));
  const joined = lines.join("\n").replace(/\\\n/g, " ");
  const stages: Stage[] = [];
  for (const line of joined.split("\n")) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const op = m[1]!.toUpperCase();
    if (op === "FROM") {
      const [, from, name] = /^(\S+)(?:\s+AS\s+(\S+))?/i.exec(m[2]!.trim())!;
      stages.push({ from: from!, name, steps: [] });
    } else if (stages.length > 0) {
      stages.at(-1)!.steps.push({ op, args: m[2]!.trim() });
    }
  }
  return stages;
}

export const DOCKERFILE = readFileSync(join(repoRoot, "Dockerfile"), "utf8");

/** The build stage's RUN that assembles /out/sidecar (the sidecar image's files) and /out/driver-stub. */
export function assembleCommand(stages: Stage[]): string {
  const build = stages.find((s) => s.name === "build");
  const run = build?.steps.find((st) => st.op === "RUN" && st.args.includes("/out/sidecar"));
  if (!run) throw new Error("the Dockerfile's build stage has no RUN that assembles /out/sidecar");
  return run.args;
}
