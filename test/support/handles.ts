// What keeps this test process's event loop alive, by kind: a timer or socket left referenced
// would hold a stopping program.

/** Referenced handles of one kind ("Timeout", "TCPSocketWrap", …) in this process now. */
export function activeHandles(kind: string): number {
  return process.getActiveResourcesInfo().filter((r) => r === kind).length;
}
