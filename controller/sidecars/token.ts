// The bearer token for the sidecars: a projected ServiceAccount token the kubelet rotates in
// place, so the file is re-read whenever it changes (checked with one stat per call).
import { ChangingFile } from "./changing-file.js";

export class TokenFile {
  private readonly file: ChangingFile;

  constructor(path: string) {
    this.file = new ChangingFile(path, "--token-file");
  }

  /** The current token; the last good one while the file is briefly missing during rotation. */
  read(): string {
    return this.file.read().toString("utf8").trim();
  }
}
