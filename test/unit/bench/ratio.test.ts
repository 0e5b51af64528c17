import { test } from "node:test";
import assert from "node:assert/strict";
import { ratioVs } from "../../bench/ratio.js";

test("a ratio that two decimals would show as its target gets a third (1.502x is not <= 1.5x)", () => {
  assert.equal(ratioVs(1.5024, 1.5), "1.502x");
  assert.equal(ratioVs(0.6991, 0.7), "0.699x");
  assert.equal(ratioVs(1.5, 1.5), "1.50x");
  assert.equal(ratioVs(1.5567, 1.5), "1.56x");
});
