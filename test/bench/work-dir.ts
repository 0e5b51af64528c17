// Where the bench keeps its sockets, state files and logs: in memory (/dev/shm) when the machine
// has it. The driver-stub rewrites its state file after every heal (tests read it), by writing a
// new file and renaming it over the old one; on ext4 that rename starts writing the new file's
// data out (150 µs a write against 20 µs on tmpfs, measured here), a cost of the stub's bookkeeping
// that no real driver has, counted in every heal of the floor and of the healer path alike.
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../support/proc.js";

const IN_MEMORY = "/dev/shm";

/** A fresh directory in memory when there is one, otherwise in the usual temporary directory. */
export function benchDir(prefix: string): string {
  try {
    return mkdtempSync(join(IN_MEMORY, prefix));
  } catch {
    return tempDir(prefix, { keep: true });
  }
}
