// A LIST in pages, as client-go's informers make it. A list of every PersistentVolume of a large
// cluster as one response is one huge body to hold, parse and deserialize at once; in pages only
// a page is in flight, and each page's objects are cut down (the informer's transform) before
// the next arrives. The pages come from one snapshot (the server keeps it consistent across
// continue tokens); a token that expired meanwhile (410) fails the list, and the informer lists
// again from the start.
import type { KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";

export const PAGE_SIZE = 500;

/** One page; `signal` ends it (the informer stopping), besides the request's own deadline. */
export type PageFn<T extends KubernetesObject> = (page: { limit: number; _continue?: string }, signal: AbortSignal) => Promise<KubernetesListObject<T>>;

export async function listInPages<T extends KubernetesObject>(
  list: PageFn<T>,
  signal: AbortSignal,
  transform: (o: T) => T = (o) => o,
  limit = PAGE_SIZE,
): Promise<KubernetesListObject<T>> {
  const items: T[] = [];
  let next: string | undefined;
  for (;;) {
    const page = await list(next === undefined ? { limit } : { limit, _continue: next }, signal);
    for (const item of page.items) items.push(transform(item));
    // Typed lists name it _continue; lists of custom objects come as plain JSON.
    const meta = page.metadata as { _continue?: string; continue?: string; resourceVersion?: string } | undefined;
    next = meta?._continue || meta?.continue || undefined;
    if (next === undefined) return { apiVersion: page.apiVersion, kind: page.kind, metadata: { resourceVersion: meta?.resourceVersion }, items };
  }
}
