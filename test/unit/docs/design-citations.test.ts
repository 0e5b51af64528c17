// Every design citation in the sources ("DESIGN 4.4", "DESIGN section 5", "DESIGN 3.3, 3.4",
// "docs/design.md 7.2") must name a numbered section heading of docs/design.md, so a comment that
// sends a reader there always lands somewhere.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { repoRoot } from "../../support/proc.js";

const SOURCE_DIRS = ["sidecar", "controller", "driver-stub", "common", "scripts", "test", "deploy"];
const SOURCE_FILE = /\.(ts|mts|mjs|js|ya?ml|json|sh)$/;
const SKIP_DIRS = new Set(["node_modules", "dist", "gen"]);

const NUMBER = String.raw`\d+(?:\.\d+)*`;
// "DESIGN 4.4", "DESIGN section 5", "DESIGN §8", "docs/design.md 7.2", "DESIGN 3.3, 3.4", "DESIGN 7.2/7.3".
const CITATION = new RegExp(String.raw`\bdesign(?:\.md)?(?:\s+section|\s*§)?\s*(${NUMBER}(?:(?:\s*[,/]\s*|\s+and\s+)${NUMBER})*)`, "gi");

export interface Citation {
  file: string;
  line: number;
  section: string;
}

/** The section numbers a text cites, with their line numbers. */
export function citationsIn(file: string, text: string): Citation[] {
  const found: Citation[] = [];
  text.split("\n").forEach((content, i) => {
    for (const m of content.matchAll(CITATION)) {
      for (const section of m[1]!.split(/\s*[,/]\s*|\s+and\s+/)) found.push({ file, line: i + 1, section });
    }
  });
  return found;
}

/** The numbers of a markdown file's numbered headings ("## 4. Sidecar", "### 4.4 Serving"). */
export function sectionsOf(markdown: string): Set<string> {
  const sections = new Set<string>();
  for (const line of markdown.split("\n")) {
    const m = /^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s/.exec(line);
    if (m) sections.add(m[1]!);
  }
  return sections;
}

export function unresolved(citations: readonly Citation[], sections: ReadonlySet<string>): string[] {
  return citations.filter((c) => !sections.has(c.section)).map((c) => `${c.file}:${c.line}: cites section ${c.section}, missing from docs/design.md`);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return SKIP_DIRS.has(e.name) ? [] : sourceFiles(path);
    return SOURCE_FILE.test(e.name) ? [path] : [];
  });
}

const design = () => readFileSync(join(repoRoot, "docs/design.md"), "utf8");

test("every design citation in the sources names a section heading of docs/design.md", () => {
  const citations = SOURCE_DIRS.flatMap((d) => sourceFiles(join(repoRoot, d))).flatMap((f) => citationsIn(relative(repoRoot, f), readFileSync(f, "utf8")));
  assert.ok(citations.length >= 40, `expected the sources' design citations, found ${citations.length}`);
  assert.deepEqual(unresolved(citations, sectionsOf(design())), []);
});

test("the citation forms are all recognised, and a missing section is named with file and line", () => {
  // Built from parts so that this file itself cites nothing.
  const cite = (rest: string) => ["DESIGN", rest].join(" ");
  const text = [
    `// ${cite("4.4")} step 4`,
    `# ${cite("section 5")}`,
    `// ${cite("3.3, 3.4")}`,
    `// ${cite("7.2/7.3")}`,
    `// ${["docs/design.md", "99.1"].join(" ")}`,
  ].join("\n");
  const found = citationsIn("x.ts", text);
  assert.deepEqual(
    found.map((c) => `${c.line}:${c.section}`),
    ["1:4.4", "2:5", "3:3.3", "3:3.4", "4:7.2", "4:7.3", "5:99.1"],
  );
  assert.deepEqual(unresolved(found, sectionsOf(design())), ["x.ts:5: cites section 99.1, missing from docs/design.md"]);
});

test("docs/design.md's numbered headings are read as sections", () => {
  const sections = sectionsOf(design());
  for (const s of ["1", "3.1", "4.4", "5", "7.6", "8", "9"]) assert.ok(sections.has(s), `section ${s}`);
  assert.ok(!sections.has("4.4.1"));
});
