// Entry point: the only place that reads process.env/argv (through parseConfig), handles signals
// and decides exit codes: 0 done, 1 failure (or a heal command with failed volumes), 2 bad flags.
import * as grpc from "@grpc/grpc-js";
import { exitWhenDone, parseCommandLine, setTerminationLog, untilSignal } from "../common/process/entry.js";
import { createLogger, setLogger, log, type Logger } from "../common/log/logger.js";
import { packageVersion } from "../common/util/version.js";
import { parseConfig, type Config, type HealCommand } from "./config/config.js";
import { healOnce } from "./heal/once.js";
import { EVENTS_FLUSH_MS, buildParts, startController } from "./run.js";

const NAME = "csi-addons-healer-controller";

async function main(): Promise<number> {
  const parsed = parseCommandLine(NAME, () => parseConfig(process.argv.slice(2), process.env));
  if (typeof parsed === "number") return parsed;
  const { config } = parsed;
  setTerminationLog(config.terminationLog);
  const logger = createLogger(config.logLevel, config.logFormat, parsed.kind === "heal");
  setLogger(logger);
  // grpc-js writes to stderr by default; its errors belong in our log stream.
  grpc.setLogger({ error: (...args: unknown[]) => logger.error(`grpc-js: ${args.map(String).join(" ")}`) } as unknown as Console);
  grpc.setLogVerbosity(grpc.logVerbosity.ERROR);
  if (parsed.kind === "heal") return runHeal(config, parsed.heal, logger);

  logger.info(`starting ${NAME}`, { version: packageVersion() });
  const controller = await startController(config, logger);
  await untilSignal(logger);
  await controller.shutdown();
  return 0;
}

async function runHeal(config: Config, cmd: HealCommand, logger: Logger): Promise<number> {
  const { cluster, passDeps, events } = buildParts(config, logger);
  const tty = process.stderr.isTTY;
  await cluster.start();
  try {
    return await healOnce(
      cluster,
      passDeps,
      cmd,
      {
        progress: (line) => process.stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`),
        print: (text) => {
          if (tty) process.stderr.write("\r\x1b[K");
          process.stdout.write(text);
        },
      },
      config.healTimeoutMs,
    );
  } finally {
    await events.flush(EVENTS_FLUSH_MS);
    cluster.stop();
    passDeps.pool.close();
  }
}

exitWhenDone(main(), log);
