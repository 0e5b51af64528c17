// The bearer token for the sidecars: a projected ServiceAccount token the kubelet rotates in
// place, so the file is re-read whenever it changes (checked with one stat per call).
import { readFileSync, statSync } from "node:fs";

export class TokenFile {
  private token = "";
  private stamp = "";

  constructor(private readonly path: string) {}

  /** The current token; the last good one while the file is briefly missing during rotation. */
  read(): string {
    try {
      const st = statSync(this.path);
      const stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
      if (stamp !== this.stamp) {
        this.token = readFileSync(this.path, "utf8").trim();
        this.stamp = stamp;
      }
    } catch (err) {
      if (!this.token) throw new Error(`cannot read --token-file ${this.path}: ${(err as NodeJS.ErrnoException).code ?? "error"}`, { cause: err });
    }
    return this.token;
  }
}
