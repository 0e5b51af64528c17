// util/common-js: a CommonJS dependency's exports whether Node (named exports and `default`) or
// the bundle's split chunk (`default` only) loaded it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { commonJs } from "../../../../sidecar/util/common-js.js";

test("commonJs: module.exports when `default` holds it, else the namespace itself", () => {
  const exportsObject = { generate: () => "pem" };
  assert.equal(commonJs({ default: exportsObject, generate: exportsObject.generate }), exportsObject, "as Node gives it");
  assert.equal(commonJs({ default: exportsObject }), exportsObject, "as the bundle's chunk gives it");
  const esm = { generate: () => "pem" };
  assert.equal(commonJs(esm), esm, "an ES module without a default");
  const nullDefault = { default: null, x: 1 };
  assert.equal(commonJs(nullDefault), nullDefault);
  const fnDefault = { default: () => 1, x: 1 };
  assert.equal(commonJs(fnDefault), fnDefault, "a default that is a function is an ES module's own export");
});
