// Entry point: the only place that reads process.env/argv (through parseConfig), handles signals
// and decides exit codes.
import * as grpc from "@grpc/grpc-js";
import { exitWhenDone, fatal, parseCommandLine, setTerminationLog, untilSignal } from "../common/process/entry.js";
import { parseConfig } from "./config/config.js";
import { createKubeApi } from "./kube/client.js";
import { inClusterEndpoint } from "./kube/endpoint.js";
import { kubeconfigEndpoint } from "./kube/kubeconfig.js";
import { KubeTransport } from "./kube/transport.js";
import { createLogger, log, setLogger } from "../common/log/logger.js";
import { startSidecar } from "./run.js";
import { packageVersion } from "../common/util/version.js";

async function main(): Promise<number> {
  const parsed = parseCommandLine("csi-addons-sidecar", () => parseConfig(process.argv.slice(2), process.env));
  if (typeof parsed === "number") return parsed;
  const config = parsed.config;
  setTerminationLog(config.terminationLog);
  const logger = createLogger(config.logLevel, config.logFormat);
  setLogger(logger);
  // grpc-js writes to stderr by default; its errors belong in our JSON stream.
  grpc.setLogger({ error: (...args: unknown[]) => logger.error(`grpc-js: ${args.map(String).join(" ")}`) } as unknown as Console);
  grpc.setLogVerbosity(grpc.logVerbosity.ERROR);
  logger.info("starting csi-addons-sidecar", {
    version: packageVersion(),
    nodeId: config.nodeId,
    pod: config.pod,
    namespace: config.namespace,
    logLevel: config.logLevel,
  });

  let transport: KubeTransport;
  try {
    const { host, port } = config.inClusterApi;
    const endpoint = config.kubeconfig ? await kubeconfigEndpoint(config.kubeconfig) : inClusterEndpoint(host, port);
    transport = new KubeTransport(endpoint, { onHttp1: (reason) => logger.info("Kubernetes API over HTTP/1.1", { reason }) });
  } catch (err) {
    return fatal(logger, `cannot load Kubernetes client configuration: ${err instanceof Error ? err.message : String(err)}`);
  }
  const sidecar = await startSidecar(config, logger, createKubeApi(transport));
  await untilSignal(logger);
  await sidecar.shutdown();
  transport.close();
  return 0;
}

exitWhenDone(main(), log);
