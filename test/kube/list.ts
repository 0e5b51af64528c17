// LIST: selectors, limit/continue pagination over one consistent snapshot (the revision of the
// first page, as etcd-backed lists are), resourceVersionMatch=Exact, and 410 Expired once that
// revision has been compacted out of the history.
import { clone, type Obj } from "./json.js";
import type { Ops } from "./ops.js";
import { apiVersionOf, type ResourceType, storageKey } from "./resources.js";
import { fieldSelector, labelSelector } from "./selectors.js";
import { badRequest, expired } from "./status.js";

interface ContinueToken {
  v: string;
  rv: number;
  start: string;
}

/** The first index whose key is >= `start` (the range is in key order). */
function firstAtOrAfter(range: readonly (readonly [string, Obj])[], start: string): number {
  let lo = 0;
  let hi = range.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (range[mid]![0] < start) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function decodeContinue(token: string): ContinueToken {
  try {
    const t = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as ContinueToken;
    if (t.v !== "meta.k8s.io/v1" || typeof t.rv !== "number" || typeof t.start !== "string") throw new Error("bad token");
    return t;
  } catch {
    throw badRequest(`continue key is not valid: invalid continue token`);
  }
}

const encodeContinue = (rv: number, lastKey: string) =>
  Buffer.from(JSON.stringify({ v: "meta.k8s.io/v1", rv, start: `${lastKey}\u0000` })).toString("base64url");

const tooOldContinue =
  "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

export function listObjects(ops: Ops, t: ResourceType, ns: string | undefined, q: URLSearchParams): Obj {
  const key = storageKey(t);
  const byLabel = labelSelector(q.get("labelSelector"));
  const byField = fieldSelector(q.get("fieldSelector"), key);
  const cont = q.get("continue");
  const limitAsked = Number(q.get("limit") ?? 0);
  if (!Number.isInteger(limitAsked) || limitAsked < 0) throw badRequest(`limit must be a non-negative integer, got "${q.get("limit")}"`);
  // resourceVersion=0 ("any"): served from the watch cache, which ignores limit and pages nothing.
  // This server's cache is its store: never older than anything a client saw from it.
  const fromCache = q.get("resourceVersion") === "0" && !cont && q.get("resourceVersionMatch") !== "Exact";
  const limit = fromCache ? 0 : limitAsked;

  let rv = ops.store.currentRv();
  let start = "";
  if (cont) {
    const token = decodeContinue(cont);
    rv = token.rv;
    start = token.start;
  } else if (q.get("resourceVersionMatch") === "Exact") {
    rv = Number(q.get("resourceVersion"));
    if (!Number.isInteger(rv) || rv <= 0) throw badRequest("resourceVersionMatch=Exact needs a resourceVersion");
  }
  const snapshot = ops.store.range(key, rv);
  if (!snapshot) throw cont ? expired(tooOldContinue) : expired(`too old resource version: ${rv} (${ops.store.oldestListableRv(key) + 1})`);

  // As etcd reads a range: from the continue key on, only as far as the page needs (then on, to
  // count or find what remains); nothing is copied but the page.
  const matches = ([k, o]: readonly [string, Obj]) => (ns === undefined || k.startsWith(`${ns}/`)) && byLabel(o) && byField(o);
  const page: (readonly [string, Obj])[] = [];
  let rest = 0;
  const counting = !q.get("labelSelector") && !q.get("fieldSelector");
  for (let i = firstAtOrAfter(snapshot, start); i < snapshot.length; i++) {
    if (!matches(snapshot[i]!)) continue;
    if (limit === 0 || page.length < limit) page.push(snapshot[i]!);
    else if (rest++ === 0 && !counting) break;
  }

  const metadata: Obj = { resourceVersion: String(rv) };
  if (rest > 0) {
    metadata.continue = encodeContinue(rv, page[page.length - 1]![0]);
    // The real server only knows the remaining count when no selector filters the range.
    if (counting) metadata.remainingItemCount = rest;
  }
  // Typed (built-in) lists carry no apiVersion/kind per item; unstructured (custom) ones do.
  const items = page.map(([, stored]) => {
    const o = clone(stored);
    if (t.custom) return ops.present(t, o);
    const { apiVersion: _a, kind: _k, ...fields } = o;
    return fields;
  });
  return { apiVersion: apiVersionOf(t), kind: t.listKind, metadata, items };
}
