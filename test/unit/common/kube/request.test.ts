// readText, which both programs read every API answer with: the whole body, and a refusal past
// the bound (the controller's 1 MiB) rather than holding more.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { readText } from "../../../../common/kube/request.js";

const body = (...sizes: number[]) => Readable.from(sizes.map((n) => Buffer.alloc(n, "a")));

test("readText: an answer of exactly maxBytes is read whole, in as many chunks as it came", async () => {
  assert.equal(await readText(body(3, 4, 1), 8), "a".repeat(8));
  assert.equal(await readText(body(8), 8), "a".repeat(8));
  assert.equal(await readText(body(), 8), "");
});

test("readText: one byte past maxBytes is refused, saying the bound", async () => {
  await assert.rejects(readText(body(4, 5), 8), /answer larger than 8 bytes/);
  await assert.rejects(readText(body(9), 8), /answer larger than 8 bytes/);
});

test("readText: without a bound, and with multi-byte characters split across chunks", async () => {
  const text = "é".repeat(1000);
  const bytes = Buffer.from(text);
  const chunks = [bytes.subarray(0, 1), bytes.subarray(1, 1001), bytes.subarray(1001)];
  assert.equal(await readText(Readable.from(chunks)), text);
});
