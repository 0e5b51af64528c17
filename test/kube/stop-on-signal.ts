// A process that serves the in-memory API until told to stop: SIGTERM/SIGINT (and, for a child of
// another process, the parent going away) stop the server once, then exit 0.
export function stopOnSignal(api: { stop(): Promise<void> }, opts: { onDisconnect?: boolean } = {}): void {
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void api.stop().then(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  if (opts.onDisconnect) process.on("disconnect", stop);
}
