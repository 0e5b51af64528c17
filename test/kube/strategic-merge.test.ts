// Strategic merge patch as the real API server applies it to a pod template: lists with a merge
// key merged item by item (containers, volumes, env by name; volumeMounts by mountPath), new items
// after the server's, `$patch` directives, other lists replaced. Expected results are those of
// k8s.io/apimachinery's strategicpatch for the same inputs.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError } from "./status.js";
import { strategicMerge } from "./strategic-merge.js";

const pod = {
  containers: [
    {
      name: "driver",
      image: "d:1",
      args: ["--a", "--b"],
      env: [
        { name: "X", value: "1" },
        { name: "Y", value: "2" },
      ],
      volumeMounts: [{ name: "s", mountPath: "/csi" }],
    },
    { name: "registrar", image: "r:1" },
  ],
  volumes: [{ name: "s", emptyDir: {} }],
  tolerations: [{ operator: "Exists" }],
};

test("containers merge by name: an existing one is patched in place, a new one goes after the server's", () => {
  const out = strategicMerge(pod, {
    containers: [
      { name: "driver", env: [{ name: "Y", value: "3" }], volumeMounts: [{ name: "t", mountPath: "/run/t" }] },
      { name: "sidecar", image: "s:1" },
    ],
    volumes: [{ name: "t", emptyDir: {} }],
  }) as typeof pod;
  assert.deepEqual(
    out.containers.map((c) => c.name),
    ["driver", "registrar", "sidecar"],
  );
  const driver = out.containers[0]!;
  assert.equal(driver.image, "d:1");
  assert.deepEqual(driver.args, ["--a", "--b"]);
  assert.deepEqual(driver.env, [
    { name: "X", value: "1" },
    { name: "Y", value: "3" },
  ]);
  assert.deepEqual(driver.volumeMounts, [
    { name: "s", mountPath: "/csi" },
    { name: "t", mountPath: "/run/t" },
  ]);
  assert.deepEqual(
    out.volumes.map((v) => v.name),
    ["s", "t"],
  );
  assert.deepEqual(out.tolerations, pod.tolerations);
  assert.deepEqual(
    pod.containers.map((c) => c.name),
    ["driver", "registrar"],
    "the input is not modified",
  );
});

test("a new item listed before an existing one lands after the server's items (normalizeElementOrder)", () => {
  const out = strategicMerge(pod, { containers: [{ name: "sidecar" }, { name: "driver", image: "d:2" }] }) as typeof pod;
  assert.deepEqual(
    out.containers.map((c) => `${c.name}:${c.image ?? ""}`),
    ["registrar:r:1", "sidecar:", "driver:d:2"],
  );
});

test("a list without a merge key (args, tolerations) is replaced whole", () => {
  const out = strategicMerge(pod, { containers: [{ name: "driver", args: ["--c"] }], tolerations: [] }) as typeof pod;
  assert.deepEqual(out.containers[0]!.args, ["--c"]);
  assert.deepEqual(out.tolerations, []);
});

test("$patch: delete removes an item, $patch: replace replaces a list or a map, null removes a field", () => {
  const out = strategicMerge(pod, {
    containers: [{ name: "registrar", $patch: "delete" }],
    volumes: [{ $patch: "replace" }, { name: "u", emptyDir: {} }],
    tolerations: null,
  }) as typeof pod;
  assert.deepEqual(
    out.containers.map((c) => c.name),
    ["driver"],
  );
  assert.deepEqual(out.volumes, [{ name: "u", emptyDir: {} }]);
  assert.equal("tolerations" in out, false);
  const replaced = strategicMerge({ a: { b: 1, c: 2 } }, { a: { $patch: "replace", b: 3 } });
  assert.deepEqual(replaced, { a: { b: 3 } });
});

test("an item without its merge key is refused (400)", () => {
  assert.throws(
    () => strategicMerge(pod, { containers: [{ image: "x" }] }),
    (e: unknown) => e instanceof ApiError && /does not contain declared merge key: name/.test(e.message),
  );
  assert.throws(() => strategicMerge(pod, { containers: [{ name: "driver", volumeMounts: [{ name: "s" }] }] }), /mountPath/);
});
