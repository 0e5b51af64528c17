import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** This package's version, found from source (tsx) and from dist/ alike. */
export function packageVersion(): string {
  let dir = dirname(new URL(import.meta.url).pathname);
  for (let i = 0; i < 6; i++) {
    const file = join(dir, "package.json");
    if (existsSync(file)) return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
    dir = dirname(dir);
  }
  return "unknown";
}
