import { test } from "node:test";
import assert from "node:assert/strict";
import { requestTotal } from "../../bench/kube.js";

test("the bench's request totals count every key, or only those the filter keeps", () => {
  const counts = { "get persistentvolumes": 3, "get volumeattachments": 2, "watch nodes": 1, "create events": 4 };
  assert.equal(requestTotal(counts), 10);
  assert.equal(requestTotal(counts, (k) => !k.startsWith("watch ")), 9);
  assert.equal(requestTotal(counts, (k) => /^(get|list|watch) /.test(k)), 6);
  assert.equal(requestTotal({}), 0);
});
