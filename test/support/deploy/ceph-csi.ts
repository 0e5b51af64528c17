// Ceph-CSI's own manifests (../shared/reference/ceph-csi, beside the checkout) and what the
// examples in deploy/examples/ceph-csi-* do to them: the upstream facts the tests render against,
// and where a container's CSI-Addons socket is in the pod's volumes.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseYamlDocuments, repoRoot, type K8sObject } from "./load.js";
import { containerOf, mountOf, type Container, type DaemonSetDoc, type PodSpec } from "./pod.js";

export const cephCsiDir = join(repoRoot, "..", "shared", "reference", "ceph-csi", "deploy");
/** Why the ceph-csi tests cannot run here, or false (for `describe(..., { skip })`). */
export const noCephCsi: string | false = existsSync(cephCsiDir)
  ? false
  : `Ceph-CSI's manifests are not at ${cephCsiDir} (../shared beside the checkout): the examples are checked only against the real ones`;

/** One example of deploy/examples and the upstream manifest it patches. */
export interface CephExample {
  dir: string;
  /** Relative to ceph-csi's deploy/. */
  manifest: string;
  kind: "DaemonSet" | "Deployment";
  name: string;
  driver: string;
}

export const CEPH_EXAMPLES: CephExample[] = [
  { dir: "examples/ceph-csi-rbd", manifest: "rbd/kubernetes/csi-rbdplugin.yaml", kind: "DaemonSet", name: "csi-rbdplugin", driver: "csi-rbdplugin" },
  {
    dir: "examples/ceph-csi-cephfs",
    manifest: "cephfs/kubernetes/csi-cephfsplugin.yaml",
    kind: "DaemonSet",
    name: "csi-cephfsplugin",
    driver: "csi-cephfsplugin",
  },
  {
    dir: "examples/ceph-csi-rbd-provisioner",
    manifest: "rbd/kubernetes/csi-rbdplugin-provisioner.yaml",
    kind: "Deployment",
    name: "csi-rbdplugin-provisioner",
    driver: "csi-rbdplugin",
  },
];

export const readCephManifest = (manifest: string): string => readFileSync(join(cephCsiDir, manifest), "utf8");

/** The example's workload in ceph-csi's manifest, as shipped. */
export function upstreamWorkload(e: CephExample): DaemonSetDoc {
  const docs = parseYamlDocuments(readCephManifest(e.manifest), e.manifest) as K8sObject[];
  const w = docs.find((d) => d.kind === e.kind && d.metadata.name === e.name);
  assert.ok(w, `${e.manifest} has no ${e.kind} ${e.name}`);
  return w as DaemonSetDoc;
}

/** ceph-csi's --csi-addons-endpoint default (cmd/cephcsi.go), served when the flag is not passed. */
export const CEPH_CSI_DEFAULT_ADDONS_ENDPOINT = "unix:///tmp/csi-addons.sock";

/** The socket the Ceph-CSI driver container serves CSI-Addons on: its last --csi-addons-endpoint, $(VAR)s expanded from its env. */
export function driverAddonsEndpoint(c: Container): string {
  const flag = (c.args ?? []).filter((a) => a.startsWith("--csi-addons-endpoint=")).at(-1);
  if (!flag) return CEPH_CSI_DEFAULT_ADDONS_ENDPOINT;
  return flag.slice(flag.indexOf("=") + 1).replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (ref, name: string) => {
    const v = c.env?.find((e) => e.name === name);
    assert.ok(v?.value !== undefined, `${c.name}: ${ref} is not a plain env value`);
    return v.value;
  });
}

/** A unix socket of a container as (volume, path inside the volume), so two containers' views compare. */
export function socketInVolume(pod: PodSpec, container: string, address: string): { volume: string; path: string } {
  const path = address.replace(/^unix:\/\//, "");
  const m = mountOf(containerOf(pod, container), path);
  return { volume: m.name, path: path.slice(m.mountPath.replace(/\/$/, "").length) };
}
