// Keeps the state file's latest good content in memory. Tests change the file while the stub runs,
// so every request first does a cheap stat() and re-reads only when the file changed; fs.watch on
// the directory additionally reloads between requests so a malformed edit is reported right away.
import { readFileSync, renameSync, statSync, watch, writeFileSync, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import { randomBytes } from "node:crypto";
import { parseState, resolveState, withVolumeHealed, type ResolvedState, type StubState } from "./state.js";

export class StateStore {
  private raw: StubState = {};
  private resolved: ResolvedState = resolveState({});
  /** What the file looked like when last read ("absent" or stat fields), good or malformed. */
  private signature = "absent";
  private watcher: FSWatcher | undefined;

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
    this.update((raw) => withVolumeHealed(raw, volumeId));
  }

  /**
   * Applies a change to the latest state, in memory and in the file (atomically, so readers never
   * see half), and returns the new state. Synchronous, so concurrent calls never lose an update.
   */
  update(change: (raw: StubState) => StubState): ResolvedState {
    this.refresh();
    const next = change(this.raw);
    if (this.file !== undefined) {
      const tmp = `${this.file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
      writeFileSync(tmp, JSON.stringify(next, null, 2) + "\n");
      renameSync(tmp, this.file);
      this.signature = this.statSignature();
    }
    this.accept(next);
    return this.resolved;
  }

  close(): void {
    this.watcher?.close();
  }

  private refresh(): void {
    if (this.file === undefined) return;
    const sig = this.statSignature();
    if (sig === this.signature) return;
    this.signature = sig;
    if (sig === "absent") {
      this.accept({});
      return;
    }
    try {
      this.accept(parseState(readFileSync(this.file, "utf8")));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        this.signature = "absent";
        this.accept({});
        return;
      }
      this.warn(`warning: state file ${this.file} is malformed (${(err as Error).message}); keeping the last good state`);
    }
  }

  private accept(raw: StubState): void {
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
