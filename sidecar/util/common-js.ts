/**
 * The exports of a CommonJS dependency loaded with `await import(...)`. Node gives them both as
 * named exports and as `default` (module.exports); the bundle, whose code splitting puts such a
 * dependency in a chunk of its own, gives only `default`. module.exports is right in both.
 */
export function commonJs<T extends object>(namespace: T): T {
  const exports = (namespace as { default?: unknown }).default;
  return (exports !== null && typeof exports === "object" ? exports : namespace) as T;
}
