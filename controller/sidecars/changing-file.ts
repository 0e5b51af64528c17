// A file something else replaces in place (the kubelet rotating a projected token, a CA bundle
// from a ConfigMap or Secret rotated), read again whenever it changes: one stat per read, so a
// reader may ask as often as it connects.
import { readFileSync, statSync } from "node:fs";

export class ChangingFile {
  private content: Buffer | undefined;
  private stamp = "";

  /** `what` names the file in errors (the flag that gave it). */
  constructor(
    private readonly path: string,
    private readonly what: string,
  ) {}

  /** The current content; the last good one while the file is briefly missing (an atomic swap of a projected volume's link). */
  read(): Buffer {
    try {
      const st = statSync(this.path);
      const stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
      if (stamp !== this.stamp) {
        this.content = readFileSync(this.path);
        this.stamp = stamp;
      }
    } catch (err) {
      if (this.content === undefined)
        throw new Error(`cannot read ${this.what} ${this.path}: ${(err as NodeJS.ErrnoException).code ?? "error"}`, { cause: err });
    }
    return this.content!;
  }
}
