// "The VolumeAttachment named for this node said attached" (DESIGN 4.4 step 4), remembered for
// --pv-cache-ttl, so a repeated health check of an attached volume needs no read. A stale proof is
// harmless: it only ever lets a health check through, which reads and changes nothing, and the
// driver answers only for volumes staged on its node (NOT_FOUND otherwise). A heal never relies on
// it: it reads the attachment again (publish_context) and refuses one that is gone or detached.
export class AttachedProofs {
  private readonly provenAt = new Map<string, number>();

  constructor(private readonly ttlMs: number, private readonly maxEntries = 4096) {}

  has(attachmentName: string): boolean {
    const at = this.provenAt.get(attachmentName);
    return at !== undefined && Date.now() - at < this.ttlMs;
  }

  remember(attachmentName: string): void {
    if (this.ttlMs <= 0) return;
    this.provenAt.delete(attachmentName);
    if (this.provenAt.size >= this.maxEntries) this.provenAt.delete(this.provenAt.keys().next().value!);
    this.provenAt.set(attachmentName, Date.now());
  }

  forget(attachmentName: string): void {
    this.provenAt.delete(attachmentName);
  }
}
