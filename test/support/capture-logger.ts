// A logger for tests of in-process parts: the JSON lines it writes, kept as objects.
import { Writable } from "node:stream";
import winston from "winston";

export function captureLogger(level = "info"): { lines: Record<string, unknown>[]; logger: winston.Logger } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { lines, logger: winston.createLogger({ level, format: winston.format.json(), transports: [new winston.transports.Stream({ stream })] }) };
}
