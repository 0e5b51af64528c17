// The healer controller as a real process for the demo and the bench: local flags (plaintext to
// sidecars on 127.0.0.1 unless the caller's args turn TLS on, no leader election, /metrics on an
// ephemeral port), JSON log to a file.
import { NAMESPACE } from "../support/fixtures.js";
import { CONTROLLER_BUNDLE, CONTROLLER_NODE_FLAGS } from "../bench/image.js";
import { spawnLogged, type LoggedProcess } from "./logged-process.js";

export { HANDLED_RESTART } from "../support/fixtures.js";
/** Its Prometheus metrics the demo and the bench read. */
export const HEALS_METRIC = "csi_addons_healer_heals";
export const RESTART_METRIC = "csi_addons_healer_restart_heal_duration_seconds";
/** Events waiting to be written (controller/report/events.ts). */
export const EVENTS_QUEUED_METRIC = "csi_addons_healer_events_queued";
/** The controller's ServiceAccount: it asks the TokenRequest API for a token per node as it. */
export const CONTROLLER_SA = { namespace: "csi-addons-healer", name: "csi-addons-healer-controller" };
/** That ServiceAccount as the API server names its requests. */
export const CONTROLLER_USER = `system:serviceaccount:${CONTROLLER_SA.namespace}:${CONTROLLER_SA.name}`;

export interface ControllerSpawnOptions {
  /** "source": controller/main.ts through tsx; "compiled": its bundle under deploy/'s V8 flags (what the image runs). */
  build: "source" | "compiled";
  kubeconfig: string;
  logFile: string;
  /** More flags, e.g. ["--check-interval=2s"]. */
  args?: string[];
  /** Node's own flags for the compiled build, instead of deploy/'s (for looking into one run). */
  nodeArgs?: string[];
}

export function localControllerArgs(o: ControllerSpawnOptions): string[] {
  return [
    `--kubeconfig=${o.kubeconfig}`,
    `--namespace=${NAMESPACE}`,
    "--sidecar-tls=false",
    "--leader-elect=false",
    "--http-endpoint=127.0.0.1:0",
    ...(o.args ?? []),
  ];
}

export function spawnController(o: ControllerSpawnOptions): Promise<LoggedProcess> {
  return spawnLogged({
    what: "the healer controller",
    ...(o.build === "source" ? { entry: "controller/main.ts" } : { entry: CONTROLLER_BUNDLE, nodeArgs: o.nodeArgs ?? CONTROLLER_NODE_FLAGS }),
    args: localControllerArgs(o),
    logFile: o.logFile,
    startedMessage: "controller started",
  });
}
