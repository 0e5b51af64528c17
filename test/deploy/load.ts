// Reads the manifests in deploy/ the way kubectl does: the files kustomization.yaml lists, each a
// stream of YAML documents in YAML 1.1 (the dialect of Kubernetes' YAML decoder).
import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parseAllDocuments } from "yaml";

export const repoRoot = new URL("../..", import.meta.url).pathname;
export const deployDir = join(repoRoot, "deploy");

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

export interface Manifest {
  /** Path relative to deploy/. */
  file: string;
  doc: K8sObject;
}

export interface Kustomization {
  namespace: string;
  resources: string[];
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

export function readKustomization(): Kustomization {
  const [k] = parseYamlDocuments(readFileSync(join(deployDir, "kustomization.yaml"), "utf8"), "kustomization.yaml");
  return k as Kustomization;
}

/** Every .yaml/.yml file below deploy/ except kustomization.yaml and the optional components/, relative to deploy/, sorted. */
export function listManifestFiles(): string[] {
  return (readdirSync(deployDir, { recursive: true }) as string[])
    .filter((f) => /\.ya?ml$/.test(f) && f !== "kustomization.yaml" && !f.startsWith("components/"))
    .map((f) => relative(deployDir, join(deployDir, f)))
    .sort();
}

/** Every object of the files the kustomization lists, in order. */
export function loadManifests(): Manifest[] {
  return readKustomization().resources.flatMap((file) =>
    parseYamlDocuments(readFileSync(join(deployDir, file), "utf8"), file).map((doc) => ({ file, doc: doc as K8sObject })),
  );
}

/** The one object of this kind (and name, when given); throws unless there is exactly one. */
export function findOne(manifests: Manifest[], kind: string, name?: string): K8sObject {
  const hits = manifests.filter((m) => m.doc.kind === kind && (name === undefined || m.doc.metadata?.name === name));
  if (hits.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ""} in deploy/, found ${hits.length}`);
  return hits[0].doc;
}

/** The objects of a kustomize Component under deploy/components/, from the files its kustomization lists. */
export function loadComponent(name: string): Manifest[] {
  const dir = join(deployDir, "components", name);
  const [k] = parseYamlDocuments(readFileSync(join(dir, "kustomization.yaml"), "utf8"), `components/${name}/kustomization.yaml`) as { kind: string; resources: string[] }[];
  if (k?.kind !== "Component") throw new Error(`components/${name} is not a kustomize Component`);
  return k.resources.flatMap((file) =>
    parseYamlDocuments(readFileSync(join(dir, file), "utf8"), file).map((doc) => ({ file: `components/${name}/${file}`, doc: doc as K8sObject })),
  );
}
