// Entry point: the only place that reads process.env/argv (through parseConfig), handles signals
// and decides exit codes.
import { writeFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { ConfigError, parseConfig } from "./config/config.js";
import { createKubeApi } from "./kube/client.js";
import { KubeTransport, inClusterEndpoint, kubeconfigEndpoint } from "./kube/transport.js";
import { createLogger, log, setLogger } from "./log/logger.js";
import { startSidecar } from "./run.js";
import { packageVersion } from "./util/version.js";

const TERMINATION_LOG = "/dev/termination-log";

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseConfig(process.argv.slice(2), process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`csi-addons-sidecar: invalid configuration: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (parsed.kind === "help") {
    process.stdout.write(`${parsed.text}\n`);
    return 0;
  }
  if (parsed.kind === "version") {
    process.stdout.write(`csi-addons-sidecar ${packageVersion()}\n`);
    return 0;
  }
  const config = parsed.config;
  const logger = createLogger(config.logLevel, config.logFormat);
  setLogger(logger);
  // grpc-js writes to stderr by default; its errors belong in our JSON stream.
  grpc.setLogger({ error: (...args: unknown[]) => logger.error(`grpc-js: ${args.map(String).join(" ")}`) } as unknown as Console);
  grpc.setLogVerbosity(grpc.logVerbosity.ERROR);
  logger.info("starting csi-addons-sidecar", { version: packageVersion(), nodeId: config.nodeId, pod: config.pod, namespace: config.namespace, logLevel: config.logLevel });

  let transport: KubeTransport;
  try {
    const { host, port } = config.inClusterApi;
    transport = new KubeTransport(config.kubeconfig ? kubeconfigEndpoint(config.kubeconfig) : inClusterEndpoint(host, port));
  } catch (err) {
    return fatal(logger, `cannot load Kubernetes client configuration: ${err instanceof Error ? err.message : String(err)}`);
  }
  const sidecar = await startSidecar(config, logger, createKubeApi(transport));
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info("signal received; shutting down", { signal });
      resolve();
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
  await sidecar.shutdown();
  transport.close();
  return 0;
}

function fatal(logger: { error: (m: string) => void }, reason: string): number {
  logger.error(reason);
  try {
    writeFileSync(TERMINATION_LOG, `${reason}\n`);
  } catch {
    // Not in a container (or not writable): the log line above is all we can do.
  }
  return 1;
}

main().then(
  (code) => {
    process.exitCode = code;
    // Let winston flush, then leave even if a library keeps a handle open.
    setTimeout(() => process.exit(code), 200).unref();
  },
  (err: unknown) => {
    process.exitCode = fatal(log(), `fatal: ${err instanceof Error ? err.message : String(err)}`);
    setTimeout(() => process.exit(1), 200).unref();
  },
);
