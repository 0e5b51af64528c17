// Plain-JSON helpers: objects in the store are JSON values, copied on every way in and out so a
// caller can never mutate stored state (a real API server hands out serialised copies too).
export type Obj = Record<string, unknown>;

export const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export const clone = <T>(v: T): T => (v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T));

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}

/** The object's metadata, created if absent (objects are validated to have an object there). */
export const metaOf = (o: Obj): Obj => {
  if (!isObject(o.metadata)) o.metadata = {};
  return o.metadata as Obj;
};

/** RFC 3339 with second precision, as metav1.Time serialises. */
export const nowRfc3339 = () => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
