// Unix socket files. A driver killed with SIGKILL leaves its socket file behind and the next start
// would fail with EADDRINUSE, so a stale file is removed before binding, but never a live server's
// socket and never a file that is not a socket.
import { lstatSync, mkdirSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { dirname } from "node:path";

function isListening(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    const done = (live: boolean) => {
      socket.destroy();
      resolve(live);
    };
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/** Makes `path` bindable: creates its directory and removes a stale socket file. */
export async function prepareSocket(path: string): Promise<void> {
  mkdirSync(dirname(path), { recursive: true });
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch {
    return; // nothing there
  }
  if (!isSocket) throw new Error(`${path} exists and is not a socket; refusing to remove it`);
  if (await isListening(path)) throw new Error(`another server is listening on ${path}`);
  rmSync(path, { force: true });
}

export function removeSocket(path: string): void {
  rmSync(path, { force: true });
}
