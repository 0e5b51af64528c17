// Per-volume operation lock, shared by NodeStage, NodeUnstage and NodeHealVolume.
// Like real CSI drivers (csi-lib-utils' VolumeLocks), it never waits: a busy volume answers ABORTED
// at once and the CO or sidecar retries later.

export class VolumeLocks {
  private readonly held = new Set<string>();

  /** Returns the release function, or undefined when another operation holds the volume. */
  tryAcquire(volumeId: string): (() => void) | undefined {
    if (this.held.has(volumeId)) return undefined;
    this.held.add(volumeId);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held.delete(volumeId);
    };
  }
}
