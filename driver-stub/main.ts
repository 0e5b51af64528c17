// Entry point of csi-addons-driver-stub: parses flags, serves until SIGTERM/SIGINT, exits.
// The only module that calls process.exit.
import { parseArgs, PROGRAM, USAGE, UsageError, type Command } from "./cli.js";
import { startStub } from "./stub.js";
import { packageVersion } from "./version.js";

let command: Command;
try {
  command = parseArgs(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof UsageError)) throw err;
  process.stderr.write(`${PROGRAM}: ${err.message} (see --help)\n`);
  process.exit(2);
}

if (command.kind === "help") {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (command.kind === "version") {
  process.stdout.write(`${PROGRAM} ${packageVersion()}\n`);
  process.exit(0);
}

const say = (line: string) => process.stdout.write(`${line}\n`);
const warn = (line: string) => process.stderr.write(`driver-stub: ${line}\n`);

try {
  const stub = await startStub(command.config, { say, warn });
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    say(`${signal}: shutting down`);
    stub.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        warn(`shutdown failed: ${(err as Error).message}`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  say(`driver ${command.config.name}, boot id ${stub.bootId}`);
  // By the stub's own clock, the one its call log uses: a reader that sees the next line late (a
  // busy bench) still learns when the driver was back.
  say(`sockets bound at ${Date.now()} ms since the epoch`);
  say("driver-stub ready");
} catch (err) {
  warn(`failed to start: ${(err as Error).message}`);
  process.exit(1);
}
