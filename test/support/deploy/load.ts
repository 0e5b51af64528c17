// Reads deploy/ the way kubectl does: `kubectl kustomize <dir>` renders a kustomization (the
// top-level install, deploy/base, an overlay a test writes), and every YAML text is parsed as a
// stream of documents in YAML 1.1 (the dialect of Kubernetes' YAML decoder).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parseAllDocuments } from "yaml";

export const repoRoot = new URL("../../..", import.meta.url).pathname;
export const deployDir = join(repoRoot, "deploy");

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

export interface Manifest {
  /** Where the object comes from (a rendered directory, relative to deploy/, or a file). */
  file: string;
  doc: K8sObject;
}

export interface Kustomization {
  namespace?: string;
  nameSuffix?: string;
  resources?: string[];
  components?: string[];
  patches?: { path?: string; target?: Record<string, string> }[];
  images?: { name: string; newName?: string; newTag?: string }[];
}

/**
 * Parses a multi-document YAML text. Throws on any syntax error or warning, and when a document
 * means something else in YAML 1.2 than in YAML 1.1 (`0440`, `yes`, `on`...), since a reader of
 * the file cannot tell which one Kubernetes will use. Empty documents are dropped, as kubectl does.
 */
export function parseYamlDocuments(text: string, source: string): unknown[] {
  const read = (version: "1.1" | "1.2") =>
    parseAllDocuments(text, { version, uniqueKeys: true, prettyErrors: true }).map((d) => {
      const problems = [...d.errors, ...d.warnings];
      if (problems.length > 0) throw new Error(`${source}: ${problems.map((p) => p.message).join("; ")}`);
      return d.toJS() as unknown;
    });
  const k8s = read("1.1");
  if (!isDeepStrictEqual(k8s, read("1.2"))) {
    throw new Error(`${source}: a value reads differently in YAML 1.1 and 1.2; quote it or write it plainly`);
  }
  return k8s.filter((d) => d !== null && d !== undefined);
}

/** The kustomization.yaml of a directory below deploy/ ("" = deploy/ itself). */
export function readKustomization(dir = ""): Kustomization {
  const [k] = parseYamlDocuments(readFileSync(join(deployDir, dir, "kustomization.yaml"), "utf8"), join(dir, "kustomization.yaml"));
  return k as Kustomization;
}

/** Every .yaml/.yml file below deploy/, relative to deploy/, sorted. */
export function listYamlFiles(): string[] {
  return (readdirSync(deployDir, { recursive: true }) as string[])
    .filter((f) => /\.ya?ml$/.test(f))
    .map((f) => relative(deployDir, join(deployDir, f)))
    .sort();
}

let documents: readonly { file: string; doc: unknown }[] | undefined;

/** Every YAML document below deploy/ with its file (relative to deploy/), parsed once per process. */
export function deployDocuments(): readonly { file: string; doc: unknown }[] {
  return (documents ??= listYamlFiles().flatMap((file) => parseYamlDocuments(readFileSync(join(deployDir, file), "utf8"), file).map((doc) => ({ file, doc }))));
}

const kubectlCheck = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
/** Why kustomizations cannot be rendered here, or false when they can (for `test(..., { skip })`). */
export const noKubectl: string | false =
  kubectlCheck.error || kubectlCheck.status !== 0 ? "kubectl is not installed: deploy/ renders only with `kubectl kustomize`" : false;

const rendered = new Map<string, K8sObject[]>();

/** `kubectl kustomize <dir>` (absolute, or relative to deploy/), parsed; cached per directory. */
export function render(dir: string): K8sObject[] {
  const abs = dir.startsWith("/") ? dir : join(deployDir, dir);
  const cached = rendered.get(abs);
  if (cached) return structuredClone(cached);
  if (noKubectl) throw new Error(noKubectl);
  const r = spawnSync("kubectl", ["kustomize", abs], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir}: ${r.stderr}`);
  const objects = parseYamlDocuments(r.stdout, `kubectl kustomize ${dir}`) as K8sObject[];
  rendered.set(abs, objects);
  return structuredClone(objects);
}

/**
 * Renders a kustomization written for the test, in a temporary directory with `files`; paths in
 * `resources` and `components` are relative to deploy/ (as "base" or "components/crd"), except
 * "./name" for one of `files`.
 */
export function renderOverlay(k: Kustomization & Record<string, unknown>, files: Record<string, string> = {}): K8sObject[] {
  const dir = mkdtempSync(join(tmpdir(), "deploy-overlay-"));
  try {
    const rel = (p: string) => (p.startsWith("./") ? p : relative(dir, join(deployDir, p)));
    const body = { ...k, resources: (k.resources ?? []).map(rel), ...(k.components ? { components: k.components.map(rel) } : {}) };
    writeFileSync(join(dir, "kustomization.yaml"), JSON.stringify(body));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    return render(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The top-level install, as `kubectl apply -k deploy/` would create it. */
export function loadManifests(): Manifest[] {
  return render(deployDir).map((doc) => ({ file: "deploy/", doc }));
}

/** The one object of this kind (and name, when given); throws unless there is exactly one. */
export function findOne(manifests: Manifest[] | K8sObject[], kind: string, name?: string): K8sObject {
  const docs = manifests.map((m) => ("doc" in m ? m.doc : m) as K8sObject);
  const hits = docs.filter((d) => d.kind === kind && (name === undefined || d.metadata?.name === name));
  if (hits.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ""}, found ${hits.length}`);
  return hits[0]!;
}

/** base plus kustomize Components under deploy/components/, rendered as an overlay adds them. */
export function loadComponents(...names: string[]): Manifest[] {
  return renderOverlay({ resources: ["base"], components: names.map((n) => `components/${n}`) }).map((doc) => ({ file: `base + ${names.join(" + ")}`, doc }));
}
