// Tells when the driver's socket file appears (or is replaced), by watching its directory: a
// restarted driver removes the stale socket and binds a new one, and that is the moment to dial,
// not whenever a reconnect backoff happens to expire. Where the directory cannot be watched (it
// does not exist yet, or inotify is exhausted) nothing is reported and the backoff still dials.
import { watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";

export interface SocketWatchOptions {
  /** Wait before watching again after the directory could not be watched (default 1 s). */
  retryMs?: number;
  /** node:fs's watch (tests pass their own). */
  watch?: (dir: string, listener: (event: string, name: string | null) => void) => FSWatcher;
}

export class SocketWatch {
  private watcher: FSWatcher | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly retryMs: number;
  private readonly watch: NonNullable<SocketWatchOptions["watch"]>;

  constructor(
    private readonly socketPath: string,
    private readonly onChange: () => void,
    opts: SocketWatchOptions = {},
  ) {
    this.retryMs = opts.retryMs ?? 1000;
    this.watch = opts.watch ?? watch;
  }

  start(): void {
    if (this.closed) return;
    try {
      // The directory, not the file: a new socket is a new inode, which a watch on the old one never sees.
      this.watcher = this.watch(dirname(this.socketPath), (_event, name) => {
        if (name === null || name === basename(this.socketPath)) this.onChange();
      });
      this.watcher.on("error", () => this.restart());
    } catch {
      this.restart();
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retry);
    this.watcher?.close();
  }

  /** The directory went away or could not be watched: try again shortly (it may be created later). */
  private restart(): void {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.closed) return;
    this.retry = setTimeout(() => this.start(), this.retryMs);
    this.retry.unref();
  }
}
