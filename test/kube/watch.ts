// WATCH over HTTP: a 200 response of newline-delimited JSON events. Starting points follow the
// real server: no resourceVersion (or "0") = synthetic ADDED for what exists, then changes; a
// resourceVersion = replay of history after it, or an ERROR event carrying 410 Expired when that
// part of history is compacted. Selector matches are evaluated per event, so an object that
// stops matching arrives as DELETED and one that starts matching as ADDED (like the watch cache).
import type { KubeRequest, KubeResponse } from "./pipeline.js";
import { metaOf, type Obj } from "./json.js";
import type { Ops } from "./ops.js";
import { apiVersionOf, type ResourceType, storageKey } from "./resources.js";
import { fieldSelector, labelSelector, selectedName } from "./selectors.js";
import { badRequest, expired } from "./status.js";
import type { StoreEvent } from "./store.js";

type Send = (type: string, object: Obj) => void;

/** `render` turns each event object into what the client asked for (an object, or a Table row). */
export function serveWatch(
  ops: Ops,
  t: ResourceType,
  ns: string | undefined,
  q: URLSearchParams,
  req: KubeRequest,
  res: KubeResponse,
  render: (o: Obj) => Obj = (o) => o,
  /** Told of every event sent but bookmarks (the counters' watch events). */
  sent: () => void = () => {},
): void {
  const key = storageKey(t);
  const byLabel = labelSelector(q.get("labelSelector"));
  const byField = fieldSelector(q.get("fieldSelector"), key);
  const match = (o: Obj | undefined) => o !== undefined && (ns === undefined || metaOf(o).namespace === ns) && byLabel(o) && byField(o);
  const timeout = q.get("timeoutSeconds");
  if (timeout !== null && !/^\d+$/.test(timeout)) throw badRequest(`timeoutSeconds must be a non-negative integer, got "${timeout}"`);
  const rvParam = q.get("resourceVersion") ?? "";
  const initialEvents = q.get("sendInitialEvents") === "true";
  if (initialEvents && q.get("allowWatchBookmarks") !== "true") throw badRequest("sendInitialEvents is only supported with allowWatchBookmarks=true");
  if (rvParam !== "" && !/^\d+$/.test(rvParam)) throw badRequest(`resourceVersion: Invalid value: "${rvParam}": must be a valid resource version`);

  // No Transfer-Encoding: HTTP/1.1 chunks a body without a length by itself, and HTTP/2 forbids the header.
  res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "no-cache, private" });
  res.flushHeaders?.();
  const send: Send = (type, object) => {
    if (res.writableEnded) return;
    res.write(`${JSON.stringify({ type, object: type === "ERROR" || type === "BOOKMARK" ? object : render(object) })}\n`);
    if (type !== "BOOKMARK") sent();
  };
  const deliver = (e: StoreEvent) => {
    const obj = ops.present(t, e.object);
    const now = e.type !== "DELETED" && match(e.object);
    const before = e.type !== "ADDED" && match(e.prev);
    if (e.type === "ADDED" && now) send("ADDED", obj);
    else if (e.type === "MODIFIED") {
      if (now && before) send("MODIFIED", obj);
      else if (now) send("ADDED", obj);
      else if (before) send("DELETED", obj);
    } else if (e.type === "DELETED" && (before || match(e.object))) send("DELETED", obj);
  };

  let backlog: StoreEvent[];
  const fromScratch = rvParam === "" || rvParam === "0" || initialEvents;
  if (fromScratch) {
    backlog = [];
    // One object by name (its namespace known): looked up, as the watch cache finds it by key,
    // rather than every object of the resource copied and filtered (50 000 PVs for each PV's watch).
    const name = selectedName(q.get("fieldSelector"));
    const candidates = name !== undefined && (!t.namespaced || ns !== undefined) ? [ops.store.get(key, ns, name)] : ops.store.list(key);
    for (const o of candidates) if (match(o)) send("ADDED", ops.present(t, o!));
    if (initialEvents)
      send("BOOKMARK", {
        kind: t.kind,
        apiVersion: apiVersionOf(t),
        metadata: { resourceVersion: String(ops.store.currentRv()), annotations: { "k8s.io/initial-events-end": "true" } },
      });
  } else {
    const events = ops.store.eventsSince(key, Number(rvParam));
    if (!events) {
      send("ERROR", expired(`too old resource version: ${rvParam} (${ops.store.oldestAvailableRv(key) + 1})`).status as unknown as Obj);
      res.end();
      return;
    }
    backlog = events;
  }
  for (const e of backlog) deliver(e);

  let timer: NodeJS.Timeout | undefined;
  const finish = () => {
    if (timer) clearTimeout(timer);
    unsubscribe();
    if (!res.writableEnded) res.end();
  };
  const unsubscribe = ops.store.watch({ key, onEvent: deliver, close: finish });
  if (timeout !== null) timer = setTimeout(finish, Number(timeout) * 1000);
  req.on("close", finish);
  res.on("close", finish);
}
