// Keeps the state file's latest good content in memory. Tests change the file while the stub runs,
// so every request first does a cheap stat() and re-reads only when the file changed; fs.watch on
// the directory additionally reloads between requests so a malformed edit is reported right away.
// The stub's own changes (a heal, a fence...) apply in memory at once and reach the file together,
// once per turn of the event loop (written()), and every answer waits for that: a burst of heals
// costs one file write per turn instead of one per heal, and a reader who got an answer still
// finds its effect in the file.
// The write stays synchronous, once per turn: written off the event loop, one write at a time,
// fewer heals shared a write and the stub's CPU per heal rose (500 heals 8 at once, two variants,
// 3 runs each: 1.20–1.56 ms against this one's 0.84–1.02 ms). What a write costs is mostly
// ext4's replace-by-rename, which starts writing the new file's data out.
import { readFileSync, renameSync, statSync, watch, writeFileSync, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import { randomBytes } from "node:crypto";
import { healVolume, parseState, resolveState, resolveVolume, type OwnResolvedState, type ResolvedState, type StubState } from "./state.js";

export class StateStore {
  private raw: StubState = {};
  private resolved: OwnResolvedState = resolveState({});
  /** What the file looked like when last read ("absent" or stat fields), good or malformed. */
  private signature = "absent";
  private watcher: FSWatcher | undefined;
  /** Changes applied in memory but not yet written, re-applied if the file changes under them. */
  private pending: ((raw: StubState) => StubState)[] = [];
  private writing: Promise<void> | undefined;

  constructor(
    private readonly file: string | undefined,
    private readonly warn: (line: string) => void,
  ) {
    if (file === undefined) return;
    this.refresh();
    try {
      // The directory, not the file: atomic writers replace the file by rename, which a watch on
      // the old inode would never see.
      this.watcher = watch(dirname(file), (_event, name) => {
        if (name === null || name === basename(file)) this.refresh();
      });
      this.watcher.on("error", () => this.watcher?.close());
    } catch {
      // No directory to watch yet: the per-request stat() still picks changes up.
    }
  }

  /** The current state; re-reads the file first if it changed. */
  current(): ResolvedState {
    this.refresh();
    return this.resolved;
  }

  /** Records a successful heal, in memory and in the file. */
  markHealed(volumeId: string): void {
    // Not update(): that resolves every volume again, and this is the one change a heal burst
    // makes hundreds of times (the driver-stub is the floor of the bench's ratios).
    this.refresh();
    const change = (raw: StubState) => healVolume(raw, volumeId);
    change(this.raw);
    this.resolved.volumes.set(volumeId, resolveVolume(this.raw.volumes![volumeId]!));
    this.schedule(change);
  }

  /**
   * Applies a change to the latest state in memory and schedules it for the file (atomically, so
   * readers never see half); returns the new state. Synchronous, so concurrent calls never lose an
   * update. Answer only after written().
   */
  update(change: (raw: StubState) => StubState): ResolvedState {
    this.refresh();
    this.accept(change(this.raw));
    this.schedule(change);
    return this.resolved;
  }

  /** Resolves once every change made so far is in the file. */
  written(): Promise<void> {
    return this.writing ?? Promise.resolve();
  }

  private schedule(change: (raw: StubState) => StubState): void {
    if (this.file === undefined) return;
    this.pending.push(change);
    this.writing ??= new Promise((resolve) => setImmediate(() => (this.write(), resolve())));
  }

  close(): void {
    this.watcher?.close();
    if (this.pending.length > 0) this.write();
  }

  private write(): void {
    this.writing = undefined;
    this.refresh(); // an edit made meanwhile is read, and the pending changes re-applied on top
    try {
      const tmp = `${this.file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
      writeFileSync(tmp, JSON.stringify(this.raw, null, 2) + "\n");
      renameSync(tmp, this.file!);
      this.signature = this.statSignature();
    } catch (err) {
      this.warn(`warning: cannot write state file ${this.file} (${(err as Error).message})`);
    }
    this.pending = [];
  }

  private refresh(): void {
    if (this.file === undefined) return;
    const sig = this.statSignature();
    if (sig === this.signature) return;
    this.signature = sig;
    if (sig === "absent") {
      this.accept({}, true);
      return;
    }
    try {
      this.accept(parseState(readFileSync(this.file, "utf8")), true);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        this.signature = "absent";
        this.accept({}, true);
        return;
      }
      this.warn(`warning: state file ${this.file} is malformed (${(err as Error).message}); keeping the last good state`);
    }
  }

  /** Takes what the file says, with the changes not written yet on top. */
  private accept(raw: StubState, fromFile = false): void {
    if (fromFile) raw = this.pending.reduce((state, change) => change(state), raw);
    this.raw = raw;
    this.resolved = resolveState(raw);
  }

  private statSignature(): string {
    try {
      const st = statSync(this.file!, { bigint: true });
      // Inode catches replace-by-rename, nanosecond times catch quick rewrites of equal size.
      return `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    } catch {
      return "absent";
    }
  }
}
