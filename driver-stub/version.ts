// The package version, the stub's vendor_version. Found by walking up from this module because the
// same code runs from driver-stub/ (tsx) and from dist/driver-stub/ (built).
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE_NAME = "csi-addons-healer";

export function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (pkg.name === PACKAGE_NAME && typeof pkg.version === "string") return pkg.version;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`package.json of ${PACKAGE_NAME} not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}
