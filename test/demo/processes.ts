// What the demo and the bench share about the processes they start: the sidecar as a real process
// (see logged-process.ts), and one place that stops everything that was started — in reverse
// order, once, also on failure and on Ctrl-C.
import { NAMESPACE, NODE, POD } from "../support/fixtures.js";
import { IMAGE_ENTRY_SCRIPT, SIDECAR_BUNDLE, SIDECAR_NODE_FLAGS, imageEnv } from "../bench/image.js";
import { spawnLogged, type LoggedProcess } from "./logged-process.js";

export { readLogLines, type LogLine } from "./logged-process.js";

export interface SidecarProcess extends LoggedProcess {
  readonly port: number;
  readonly httpPort: number;
  /** host:port of the controller-facing gRPC server. */
  readonly address: string;
}

export interface SidecarSpawnOptions {
  /**
   * "source": sidecar/main.ts through tsx; "compiled": the bundle under deploy/'s V8 flags in the
   * image's environment (what the image runs in deploy/'s pods); "image": the image's ENTRYPOINT
   * script in the image's environment and nothing else (what the image runs in a pod that sets no
   * NODE_OPTIONS; pass NODE_OPTIONS: undefined in `env` to drop one of ours).
   */
  build: "source" | "compiled" | "image";
  driverSocket: string;
  kubeconfig: string;
  logFile: string;
  /** The node and node-plugin pod it runs for; default the fixtures' NODE and POD. */
  node?: string;
  pod?: string;
  /** More flags, e.g. ["--max-inflight=32"]. */
  args?: string[];
  /** Environment added to ours, e.g. NODE_OPTIONS. */
  env?: NodeJS.ProcessEnv;
}

/** The flags of a local sidecar: fixture pod/node, ephemeral ports on 127.0.0.1, caller auth off. */
export function localSidecarArgs(o: SidecarSpawnOptions): string[] {
  return [
    `--csi-addons-address=unix://${o.driverSocket}`,
    `--node-id=${o.node ?? NODE}`,
    `--pod=${o.pod ?? POD}`,
    `--namespace=${NAMESPACE}`,
    "--controller-ip=127.0.0.1",
    "--controller-port=0",
    "--http-endpoint=127.0.0.1:0",
    `--kubeconfig=${o.kubeconfig}`,
    "--enable-auth=false",
    ...(o.args ?? []),
  ];
}

export async function spawnSidecar(o: SidecarSpawnOptions): Promise<SidecarProcess> {
  const p = await spawnLogged({
    what: "the sidecar",
    ...(o.build === "source"
      ? { entry: "sidecar/main.ts" }
      : o.build === "image"
        ? { entry: IMAGE_ENTRY_SCRIPT }
        : { entry: SIDECAR_BUNDLE, nodeArgs: SIDECAR_NODE_FLAGS }),
    args: localSidecarArgs(o),
    env: o.build === "source" ? o.env : { ...imageEnv(o.logFile), ...o.env },
    logFile: o.logFile,
    startedMessage: "sidecar started",
  });
  const port = p.started["controllerPort"] as number;
  return Object.assign(p, { port, httpPort: p.started["httpPort"] as number, address: `127.0.0.1:${port}` });
}

/**
 * Everything started, to be stopped in reverse order exactly once. `onSignal` runs the cleanup
 * on SIGINT/SIGTERM and then exits 130/143 (the shell convention for "killed by a signal").
 */
export class Cleanup {
  private readonly actions: { what: string; run: () => Promise<unknown> | unknown }[] = [];
  private running: Promise<string[]> | undefined;
  /** Set once a signal started the cleanup: the main flow then stops reporting its own errors. */
  interrupted = false;

  private late: Promise<string[]> = Promise.resolve([]);
  private flow: Promise<unknown> = Promise.resolve();

  /** The main flow, which must notice `interrupted` and give up soon; a signal waits for it. */
  watch<T>(flow: Promise<T>): Promise<T> {
    this.flow = flow.catch(() => undefined);
    return flow;
  }

  /**
   * Registers how to stop something just started. Once the cleanup has begun (a signal arrived
   * while the thing was starting), it is stopped right away instead.
   */
  add(what: string, run: () => Promise<unknown> | unknown): void {
    if (this.running === undefined) {
      this.actions.push({ what, run });
      return;
    }
    this.late = this.late.then(async (failed) => {
      try {
        await run();
      } catch (err) {
        failed.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
      }
      return failed;
    });
  }

  /** Runs every action (last added first); returns the ones that failed, described. */
  run(): Promise<string[]> {
    this.running ??= (async () => {
      const failed: string[] = [];
      for (const a of this.actions.splice(0).reverse()) {
        try {
          await a.run();
        } catch (err) {
          failed.push(`${a.what}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
      return failed;
    })();
    return this.running;
  }

  /** On SIGINT/SIGTERM: run the cleanup, then exit with `exitCode()` (default 130/143). */
  onSignal(say: (line: string) => void, exitCode?: () => number): void {
    for (const [signal, code] of [
      ["SIGINT", 130],
      ["SIGTERM", 143],
    ] as const) {
      process.once(signal, () => {
        this.interrupted = true;
        say(`\n${signal}: stopping everything this run started ...`);
        void this.run().then(async (failed) => {
          // The interrupted main flow may be starting a process right now: wait until it has
          // given up, so that what it started meanwhile (see add) is stopped too.
          await this.flow;
          failed.push(...(await this.late));
          for (const f of failed) say(`cleanup failed: ${f}`);
          process.exit(failed.length > 0 ? 1 : (exitCode?.() ?? code));
        });
      });
    }
  }
}
