// A container's memory settings as deploy/ states them: NODE_OPTIONS (the V8 heap caps) and
// resources.limits.memory, of the sidecar or of the healer controller. Looked up by shape, not by
// file: every YAML document below deploy/ is searched for the sidecar's container (named
// csi-addons-healer, in a DaemonSet or a kustomize patch of one) or the controller's (the one
// that runs csi-addons-healer-controller), so the bench follows the manifests wherever they are.
import { deployDocuments } from "../support/deploy/load.js";

export const SIDECAR_CONTAINER = "csi-addons-healer";
const CONTROLLER_ENTRY = "csi-addons-healer-controller.js";

const isContainer: Record<"sidecar" | "controller", (o: Record<string, unknown>) => boolean> = {
  sidecar: (o) => o["name"] === SIDECAR_CONTAINER,
  controller: (o) => Array.isArray(o["command"]) && (o["command"] as unknown[]).some((c) => typeof c === "string" && c.endsWith(CONTROLLER_ENTRY)),
};

export interface DeployLimits {
  /** NODE_OPTIONS of the container, e.g. "--max-old-space-size=96 --max-semi-space-size=2". */
  nodeOptions: string;
  /** The container's memory limit in bytes, and as written. */
  limitBytes: number;
  limit: string;
  /** The container's memory request as written, when it sets one. */
  request?: string;
  /** Files the values came from, relative to deploy/. */
  files: string[];
}

type Json = Record<string, unknown>;

/** deploy/'s containers of `which` program, by shape, in file and document order. */
function containers(which: "sidecar" | "controller"): { o: Json; file: string }[] {
  const found: { o: Json; file: string }[] = [];
  const visit = (node: unknown, file: string): void => {
    if (Array.isArray(node)) return node.forEach((n) => visit(n, file));
    if (node === null || typeof node !== "object") return;
    const o = node as Json;
    if (isContainer[which](o)) found.push({ o, file });
    for (const v of Object.values(o)) visit(v, file);
  };
  for (const { file, doc } of deployDocuments()) visit(doc, file);
  return found;
}

export function readDeployLimits(which: "sidecar" | "controller" = "sidecar"): DeployLimits {
  let nodeOptions: { value: string; file: string } | undefined;
  let limit: { value: string; file: string } | undefined;
  let request: string | undefined;
  for (const { o, file } of containers(which)) {
    const env = Array.isArray(o["env"]) ? (o["env"] as Json[]) : [];
    const opts = env.find((e) => e["name"] === "NODE_OPTIONS")?.["value"];
    if (typeof opts === "string") nodeOptions ??= { value: opts, file };
    const mem = ((o["resources"] as Json | undefined)?.["limits"] as Json | undefined)?.["memory"];
    if (typeof mem === "string" || typeof mem === "number") limit ??= { value: String(mem), file };
    const req = ((o["resources"] as Json | undefined)?.["requests"] as Json | undefined)?.["memory"];
    if (typeof req === "string" || typeof req === "number") request ??= String(req);
  }
  if (!nodeOptions || !limit) {
    throw new Error(`deploy/ has no ${which} container with ${!nodeOptions ? "env NODE_OPTIONS" : "resources.limits.memory"}`);
  }
  return {
    nodeOptions: nodeOptions.value,
    limit: limit.value,
    limitBytes: quantityBytes(limit.value),
    ...(request === undefined ? {} : { request }),
    files: [...new Set([nodeOptions.file, limit.file])],
  };
}

/** The command deploy/'s controller container runs: the image's node and the controller's bin. */
export function controllerCommand(): string[] {
  const [first] = containers("controller");
  if (!first) throw new Error(`deploy/ has no container whose command runs ${CONTROLLER_ENTRY}`);
  return first.o["command"] as string[];
}

const UNITS: Record<string, number> = { "": 1, k: 1e3, M: 1e6, G: 1e9, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };

/** A Kubernetes memory quantity ("256Mi", "300M", "268435456") in bytes. */
export function quantityBytes(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(k|M|G|Ki|Mi|Gi)?$/.exec(q.trim());
  if (!m) throw new Error(`cannot read the memory quantity ${JSON.stringify(q)}`);
  return Number(m[1]) * UNITS[m[2] ?? ""]!;
}
