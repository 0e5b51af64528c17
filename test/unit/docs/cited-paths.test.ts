// Every file a document cites must exist: the relative targets of its Markdown links, and the
// repository paths it writes as inline code (`test/unit/docs/cited-paths.test.ts`), so a doc never
// sends a reader to a file that was renamed or removed. Also: no comment in the sources (the
// TypeScript and JavaScript, and the "#" comments of the manifests, the shell scripts and the
// Dockerfile) names an issue by its number ("issue" and a number), which no reader of the code can
// follow; a comment says what is meant instead.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";
import { repoRoot } from "../../support/proc.js";

const root = resolve(repoRoot);
/** Not the project's own files: dependencies, build output, the bench's results, generated code. */
const SKIP = (rel: string) => rel.split("/").includes("node_modules") || ["dist", ".git", "bench", ".tmp", "proto/gen"].includes(rel);

/** Folders at the top of the repository: an inline-code path starting with one is checked. */
const TOP_DIRS = ["sidecar", "controller", "common", "test", "scripts", "deploy", "proto", "docs", "driver-stub", "bin"];
/** Extensions of the files the docs cite: an inline-code path ending in one (and holding a "/") is checked. */
const CITED_FILE = /\/[^/]*\.(ts|mts|mjs|js|json|md|ya?ml|proto|sh)$/;
/** What the build or the bench writes and the repository does not hold. */
const GENERATED = ["dist/", "bench/", "node_modules/"];

export interface CitedPath {
  doc: string;
  line: number;
  path: string;
  /** Where the path was looked for: a link's target from the doc's folder; inline code from the repository's root, else the doc's folder. */
  candidates: string[];
}

/** The text with every fenced code block blanked, its lines kept, so that offsets keep their line numbers. */
function withoutFences(markdown: string): string {
  let fence: string | undefined;
  return markdown
    .split("\n")
    .map((line) => {
      const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
      if (fence === undefined) {
        if (m) fence = m[1]!;
        return m ? "" : line;
      }
      if (m && m[1]![0] === fence[0] && m[1]!.length >= fence.length && line.trim() === m[1]) fence = undefined;
      return "";
    })
    .join("\n");
}

const lineAt = (text: string, offset: number) => text.slice(0, offset).split("\n").length;
const isGlob = (p: string) => /[*<>{}…]|\.\.\./.test(p);
const isUrl = (p: string) => /^[a-z][a-z0-9+.-]*:/i.test(p);
/** Text just before a code span that names another repository ("csi-addons/spec `identity/identity.proto`"): the path is that one's. */
const OTHER_REPOSITORY = /(?:^|\s)[\w.-]+\/[\w.-]+(?:'s)?\s+$/;
/** The checkout's neighbours (../shared/reference/) are not the repository's to keep. */
const isBesideCheckout = (p: string) => /^(\.\.\/)+shared\//.test(p);

/** A path inside the repository, relative to its root; undefined when it leaves it. */
function inRepo(abs: string): string | undefined {
  const rel = relative(root, abs);
  return rel.startsWith("..") || rel === "" ? undefined : rel.split(sep).join("/");
}

/** Whether an inline-code token looks like a repository path. */
function looksLikeRepoPath(token: string): boolean {
  if (token.startsWith("/") || isUrl(token) || isGlob(token)) return false;
  const bare = token.replace(/^\.\//, "");
  return CITED_FILE.test(bare) || TOP_DIRS.some((d) => bare.startsWith(`${d}/`));
}

/** The paths a Markdown document cites, with the line each is on, in the order they are written. */
export function citedPaths(doc: string, markdown: string): CitedPath[] {
  const text = withoutFences(markdown);
  const docDir = dirname(join(root, doc));
  const found: (CitedPath & { offset: number })[] = [];
  const add = (offset: number, path: string, places: string[]) => {
    if (isBesideCheckout(path)) return;
    const candidates = places.map(inRepo).filter((c): c is string => c !== undefined);
    if (candidates.length === 0 || candidates.some((c) => GENERATED.some((g) => `${c}/`.startsWith(g)))) return;
    found.push({ doc, line: lineAt(text, offset), path, candidates, offset });
  };
  // Inline code first, then the links outside it: a link written inside a code span is no link.
  const spans: [number, number][] = [];
  for (const m of text.matchAll(/(`+)(?!`)([\s\S]*?[^`])\1(?!`)/g)) {
    spans.push([m.index, m.index + m[0].length]);
    if (m[2]!.includes("\n\n") || OTHER_REPOSITORY.test(text.slice(text.lastIndexOf("\n", m.index) + 1, m.index))) continue;
    for (const t of m[2]!.trim().split(/\s+/)) {
      const token = t.replace(/^[("']+|[)"',;:]+$/g, "").replace(/^[^=]*=/, "");
      if (!looksLikeRepoPath(token)) continue;
      const path = token.replace(/:\d+$/, "");
      add(m.index, path, [resolve(root, path), resolve(docDir, path)]);
    }
  }
  const inSpan = (offset: number) => spans.some(([from, to]) => offset >= from && offset < to);
  // [text](target "title"), ![alt](target), and reference definitions "[name]: target".
  const links = [...text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g), ...text.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)];
  for (const m of links) {
    if (inSpan(m.index)) continue;
    const target = decodeURI(m[1]!.split("#")[0]!);
    if (target === "" || isUrl(target) || isGlob(target)) continue;
    add(m.index, target, [target.startsWith("/") ? join(root, target) : resolve(docDir, target)]);
  }
  return found.sort((a, b) => a.offset - b.offset).map(({ offset: _, ...c }) => c);
}

/** "doc:line: cites path, which does not exist" for every cited path that is not there. */
export function missing(cited: readonly CitedPath[], exists: (repoPath: string) => boolean): string[] {
  return cited.filter((c) => !c.candidates.some(exists)).map((c) => `${c.doc}:${c.line}: cites ${c.path}, which does not exist`);
}

/** The repository's files whose names match `wanted`, relative to its root. */
function files(dir: string, wanted: RegExp): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    const rel = relative(root, path).split(sep).join("/");
    if (SKIP(rel)) return [];
    if (e.isDirectory()) return files(path, wanted);
    return wanted.test(e.name) ? [rel] : [];
  });
}

const docs = () => files(root, /\.md$/);
const existsInRepo = (p: string) => existsSync(join(root, p));

test("every file path the docs cite exists", () => {
  const all = docs();
  for (const d of ["README.md", "deploy/README.md", "docs/design.md", "docs/testing.md", "docs/performance.md", "docs/decisions/README.md"]) {
    assert.ok(all.includes(d), `${d} is read`);
  }
  const cited = all.flatMap((d) => citedPaths(d, readFileSync(join(root, d), "utf8")));
  assert.ok(cited.length >= 150, `expected the docs' cited paths, found ${cited.length}`);
  assert.deepEqual(missing(cited, existsInRepo), [], "paths cited in the docs that are not in the repository");
});

test("links and inline-code paths are read from a doc, and a missing one is named with doc and line", () => {
  const doc = [
    "See [the design](design.md#73-how-it-calls) and [../README.md](../README.md).", // 1
    "A folder: `test/unit/docs/` and a file `docs/testing.md`, a command `npm test -- test/unit/sidecar/relay/`.", // 2
    "```sh", // 3
    "node scripts/not-there.mjs   # in a fence: not a citation", // 4
    "```", // 5
    "Not checked: `../shared/reference/x.ts`, `dist/*.mjs`, `test/unit/<source path>/<module>.test.ts`, [web](https://example.com/a.md), `/dev/shm`, `dist/csi-addons-sidecar.mjs`.", // 6
    "Missing: [a page](no-such-page.md) and `controller/heal/no-such-module.ts:12`,", // 7
    "and `config/no-such.yaml` and `sidecar/no-such-folder/`.", // 8
    "Another repository's path: csi-addons/spec `identity/identity.proto`, csi-addons/kubernetes-csi-addons's `config/rbac/role.yaml`.", // 9
  ].join("\n");
  const cited = citedPaths("docs/example.md", doc);
  assert.deepEqual(
    cited.map((c) => `${c.line}:${c.path}`),
    [
      "1:design.md",
      "1:../README.md",
      "2:test/unit/docs/",
      "2:docs/testing.md",
      "2:test/unit/sidecar/relay/",
      "7:no-such-page.md",
      "7:controller/heal/no-such-module.ts",
      "8:config/no-such.yaml",
      "8:sidecar/no-such-folder/",
    ],
  );
  assert.deepEqual(missing(cited, existsInRepo), [
    "docs/example.md:7: cites no-such-page.md, which does not exist",
    "docs/example.md:7: cites controller/heal/no-such-module.ts, which does not exist",
    "docs/example.md:8: cites config/no-such.yaml, which does not exist",
    "docs/example.md:8: cites sidecar/no-such-folder/, which does not exist",
  ]);
});

// ---- no issue numbers, dates or words naming where a comment was written, in the sources' comments ----

const SOURCE = /\.(ts|mts|mjs|js)$/;
/** Files whose comments start with "#": the manifests, the scripts, the Dockerfile. */
const HASH_COMMENTED = /(\.(ya?ml|sh)|^Dockerfile)$/;
/** "issue", "Issue #" or "issues" and a number. Built from parts, so that this file's comments hold no match. */
const ISSUE_NUMBER = new RegExp(
  [
    ["\\bissues?", "\\s+#?\\d+"].join(""),
    // A date (a measurement's belongs in docs/performance.md) and the machine a comment was written on.
    ["\\b20\\d\\d-", "[01]\\d-[0-3]\\d\\b"].join(""),
    ["\\bthis", " machine\\b"].join(""),
  ].join("|"),
  "i",
);

export interface CommentHit {
  file: string;
  line: number;
  text: string;
}

/** The comments of a source file that name an issue by number, found by the TypeScript parser (so strings and regexes are not comments). */
export function issueComments(file: string, source: string): CommentHit[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, /\.m?js$/.test(file) ? ts.ScriptKind.JS : ts.ScriptKind.TS);
  const seen = new Set<number>();
  const hits: CommentHit[] = [];
  const visit = (node: ts.Node) => {
    const at = node.getFullStart();
    for (const r of [...(ts.getLeadingCommentRanges(source, at) ?? []), ...(ts.getTrailingCommentRanges(source, at) ?? [])]) {
      if (seen.has(r.pos)) continue;
      seen.add(r.pos);
      const comment = source.slice(r.pos, r.end);
      const m = ISSUE_NUMBER.exec(comment);
      if (m) hits.push({ file, line: sf.getLineAndCharacterOfPosition(r.pos + m.index).line + 1, text: m[0] });
    }
    node.getChildren(sf).forEach(visit);
  };
  visit(sf);
  return hits.sort((a, b) => a.line - b.line);
}

/** The same in a file whose comments start with "#" (a "#" at the start of a line or after a space). */
export function issueHashComments(file: string, source: string): CommentHit[] {
  return source.split("\n").flatMap((content, i) => {
    const comment = /(?:^|\s)#.*$/.exec(content)?.[0];
    const m = comment === undefined ? null : ISSUE_NUMBER.exec(comment);
    return m ? [{ file, line: i + 1, text: m[0] }] : [];
  });
}

test("no comment in the sources names an issue by its number, a date or the machine it was written on", () => {
  const sources = files(root, SOURCE);
  assert.ok(sources.length >= 300, `expected the sources, found ${sources.length}`);
  for (const f of ["test/bench/report-targets.ts", "scripts/break-promises.mjs", "bin/csi-addons-sidecar.js"]) assert.ok(sources.includes(f), `${f} is read`);
  assert.ok(!sources.some((f) => f.startsWith("proto/gen/") || f.startsWith("dist/")), "generated code is not read");
  const hashed = files(root, HASH_COMMENTED);
  for (const f of ["Dockerfile", "scripts/build-image.sh", "deploy/components/controller/role.yaml"]) assert.ok(hashed.includes(f), `${f} is read`);
  const hits = [...sources, ...hashed].flatMap((f) => {
    const text = readFileSync(join(root, f), "utf8");
    if (!ISSUE_NUMBER.test(text)) return [];
    return SOURCE.test(f) ? issueComments(f, text) : issueHashComments(f, text);
  });
  assert.deepEqual(
    hits.map((h) => `${h.file}:${h.line}: "${h.text}": say what is meant instead`),
    [],
    "comments naming an issue number",
  );
});

test("issue numbers are found in comments only, with their line", () => {
  const n = (k: number) => ["issue", String(k)].join(" ");
  const hash = [`# the ${n(48)} grants`, `image: "registry/x:tag#${n(5)}"`, `key: value # and ${n(6)}`].join("\n");
  assert.deepEqual(
    issueHashComments("x.yaml", hash).map((h) => `${h.line}:${h.text}`),
    ["1:issue 48", "3:issue 6"],
  );
  const source = [
    `// ${n(12)}: a line comment`, // 1
    `const s = "${n(5)} in a string";`, // 2
    `const r = /${n(6)}/;`, // 3
    `/**`, // 4
    ` * the ${["Issues", "#48"].join(" ")} in a block`, // 5
    ` */`, // 6
    `const t = \`\${s} ${n(7)}\`; // and ${n(49)} after code`, // 7
    `function f() {`, // 8
    `  return 1;`, // 9
    `  // ${n(3)} before the closing brace`, // 10
    `}`, // 11
    `// ${n(4)} at the end`, // 12
  ].join("\n");
  assert.deepEqual(
    issueComments("x.ts", source).map((h) => `${h.line}:${h.text.toLowerCase()}`),
    ["1:issue 12", "5:issues #48", "7:issue 49", "10:issue 3", "12:issue 4"],
  );
});
