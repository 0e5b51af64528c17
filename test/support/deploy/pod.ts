// The pod-level checks that the example DaemonSet and a driver's DaemonSet with the sidecar added
// (deploy/README.md's walk-through) must both pass: hardening, no host paths, ports, TLS, token.
import assert from "node:assert/strict";
import type { K8sObject } from "./load.js";

export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  ports?: { name?: string; containerPort: number; hostPort?: number }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean; mountPropagation?: string }[];
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    runAsGroup?: number;
    readOnlyRootFilesystem?: boolean;
    allowPrivilegeEscalation?: boolean;
    privileged?: boolean;
    capabilities?: { add?: string[]; drop?: string[] };
    seccompProfile?: { type: string };
  };
}

export interface Volume {
  name: string;
  emptyDir?: object;
  hostPath?: { path: string; type?: string };
  secret?: { secretName: string; optional?: boolean; defaultMode?: number };
  projected?: { sources: { serviceAccountToken?: { path: string; expirationSeconds?: number }; configMap?: { name: string }; downwardAPI?: object }[] };
}

export interface PodSpec {
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  nodeSelector?: Record<string, string>;
  priorityClassName?: string;
  tolerations?: unknown[];
  securityContext?: { fsGroup?: number; runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
  initContainers?: Container[];
  containers: Container[];
  volumes: Volume[];
}

export interface DaemonSetDoc extends K8sObject {
  spec: { template: { metadata: { labels: Record<string, string> }; spec: PodSpec } };
}

/** The flags a sidecar container passes, by name ("true" for a bare boolean flag). */
export function flagsOf(c: Container): Map<string, string> {
  const flags = new Map<string, string>();
  for (const arg of c.args ?? []) {
    const m = /^--([a-z][a-z-]*)(?:=(.*))?$/.exec(arg);
    assert.ok(m, `${c.name}: argument ${arg} is not --flag or --flag=value`);
    assert.ok(!flags.has(m[1]!), `${c.name}: --${m[1]} given twice`);
    flags.set(m[1]!, m[2] ?? "true");
  }
  return flags;
}

export function containerOf(pod: PodSpec, name: string): Container {
  const c = pod.containers.find((x) => x.name === name);
  assert.ok(c, `no container ${name}`);
  return c;
}

export const volumeOf = (pod: PodSpec, name: string): Volume => {
  const v = pod.volumes.find((x) => x.name === name);
  assert.ok(v, `no volume ${name}`);
  return v;
};

/** The mount of `c` that holds `path`. */
export function mountOf(c: Container, path: string): NonNullable<Container["volumeMounts"]>[number] {
  const m = c.volumeMounts?.find((v) => path === v.mountPath || path.startsWith(v.mountPath.replace(/\/?$/, "/")));
  assert.ok(m, `${path} is not under a volume mounted in container ${c.name}`);
  return m;
}

/**
 * Default ports of the sidecars and helpers found in CSI node plugins (and the upstream
 * csi-addons sidecar's, which ours replaces rather than joins). Our defaults must avoid them.
 */
export const COMMON_CSI_PORTS: Record<number, string> = {
  9808: "livenessprobe --http-endpoint (kubernetes-csi default)",
  9809: "node-driver-registrar --http-endpoint (common choice)",
  9071: "Rook's csi-addons port of the RBD provisioner",
  8080: "csi-provisioner/attacher/resizer/snapshotter metrics (common choice), ceph-csi metrics",
  8081: "ceph-csi CephFS metrics, controller-runtime probes",
  8680: "ceph-csi RBD liveness-prometheus",
  8681: "ceph-csi CephFS liveness-prometheus",
  9080: "Rook RBD liveness metrics",
  9081: "Rook CephFS liveness metrics",
  9090: "kube-rbac-proxy / Prometheus",
  9100: "node-exporter (host network)",
};

/** Every port a container listens on: declared containerPorts and the ports its flags name. */
export function listeningPorts(c: Container): number[] {
  const ports = new Set((c.ports ?? []).map((p) => p.containerPort));
  for (const arg of c.args ?? []) {
    const m = /^--?(?:http-endpoint|metrics-address|metricsport|metrics-port|health-port|controller-port)=(?:.*:)?(\d+)$/.exec(arg);
    if (m) ports.add(Number(m[1]));
  }
  return [...ports];
}

/** The sidecar container runs locked down: no capabilities, read-only, no escalation, limits. */
export function assertHardened(c: Container, opts: { root?: boolean } = {}): void {
  const sc = c.securityContext!;
  assert.ok(sc, `${c.name}: no securityContext`);
  if (opts.root) {
    assert.equal(sc.runAsUser, 0);
  } else {
    assert.equal(sc.runAsNonRoot, true);
    assert.ok(typeof sc.runAsUser === "number" && sc.runAsUser > 0);
  }
  assert.equal(sc.readOnlyRootFilesystem, true);
  assert.equal(sc.allowPrivilegeEscalation, false);
  assert.notEqual(sc.privileged, true);
  assert.deepEqual(sc.capabilities, { drop: ["ALL"] });
  assert.equal(sc.seccompProfile?.type, "RuntimeDefault");
  assert.ok(c.resources?.limits?.memory, "no memory limit");
  assert.ok(c.resources?.requests?.memory && c.resources.requests.cpu, "no requests");
}

/**
 * The sidecar's place in a pod that runs it: no host path at all in the sidecar, the
 * ports it takes collide with no other container's nor a common CSI sidecar default, probes on
 * the HTTP endpoint, TLS files required from a Secret only the sidecar mounts.
 */
export function assertSidecarInPod(pod: PodSpec, sidecarName: string): Map<string, string> {
  const sidecar = containerOf(pod, sidecarName);
  const flags = flagsOf(sidecar);
  for (const m of sidecar.volumeMounts ?? []) {
    assert.equal(volumeOf(pod, m.name).hostPath, undefined, `the sidecar mounts the host path of ${m.name} at ${m.mountPath}`);
    assert.ok(!m.mountPath.startsWith("/var/lib/kubelet"), `the sidecar mounts ${m.mountPath}`);
  }

  const controllerPort = Number(flags.get("controller-port") ?? 9070);
  const httpPort = Number(/:(\d+)$/.exec(flags.get("http-endpoint") ?? "")?.[1]);
  assert.ok(httpPort > 0, "--http-endpoint must be set for the probes");
  const declared = (sidecar.ports ?? []).map((p) => p.containerPort).sort();
  assert.deepEqual(declared, [controllerPort, httpPort].sort(), "the sidecar declares exactly its two ports");
  for (const port of declared) assert.equal(COMMON_CSI_PORTS[port], undefined, `port ${port} is ${COMMON_CSI_PORTS[port]}`);
  for (const other of pod.containers.filter((c) => c !== sidecar)) {
    for (const port of listeningPorts(other)) assert.ok(!declared.includes(port), `port ${port} is taken by ${other.name}`);
  }
  const portOf = (ref: string | number) => (typeof ref === "number" ? ref : sidecar.ports?.find((p) => p.name === ref)?.containerPort);
  for (const [probe, path] of [
    [sidecar.livenessProbe, "/healthz"],
    [sidecar.readinessProbe, "/readyz"],
  ] as const) {
    assert.equal(probe?.httpGet?.path, path);
    assert.equal(portOf(probe!.httpGet!.port), httpPort);
  }

  // Listen: every address by default; with host networking, the pod's (= the node's reported) IP.
  const env = Object.fromEntries((sidecar.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom?.fieldRef?.fieldPath]));
  if (pod.hostNetwork) {
    assert.equal(flags.get("controller-ip"), "$(POD_IP)");
    assert.match(flags.get("http-endpoint")!, /^\[\$\(POD_IP\)\]:\d+$/);
    assert.equal(env.POD_IP, "status.podIP");
  } else {
    assert.equal(flags.get("controller-ip"), undefined, "the default (::) listens on IPv6 and IPv4");
    assert.match(flags.get("http-endpoint")!, /^:\d+$/);
  }
  assert.equal(env.NODE_ID, "spec.nodeName");
  assert.equal(env.POD_NAME, "metadata.name");
  assert.equal(env.POD_NAMESPACE, "metadata.namespace");
  assert.equal(env.POD_UID, "metadata.uid");

  assert.notEqual(flags.get("enable-auth"), "false");
  assert.equal(flags.get("require-tls-files"), "true", "no silent self-signed fallback in a cluster");
  for (const f of ["tls-cert-file", "tls-key-file"]) {
    const m = mountOf(sidecar, flags.get(f)!);
    assert.equal(m.readOnly, true);
    const secret = volumeOf(pod, m.name).secret;
    assert.ok(secret, `${f} is not from a Secret`);
    assert.notEqual(secret.optional, true, "a missing Secret must keep the pod from starting");
    for (const c of pod.containers.filter((x) => x !== sidecar)) {
      assert.ok(!c.volumeMounts?.some((v) => v.name === m.name), `${c.name} must not see the TLS key`);
    }
  }

  // The token: projected into the sidecar only (automount off), or the pod's automounted one.
  const tokenMount = sidecar.volumeMounts?.find((v) => v.mountPath === "/var/run/secrets/kubernetes.io/serviceaccount");
  if (pod.automountServiceAccountToken === false) {
    assert.ok(tokenMount, "automount is off but the sidecar gets no token");
    assert.equal(tokenMount.readOnly, true);
    const sources = volumeOf(pod, tokenMount.name).projected?.sources ?? [];
    const token = sources.find((s) => s.serviceAccountToken)?.serviceAccountToken;
    assert.equal(token?.path, "token");
    assert.equal(token?.expirationSeconds, 3600);
    assert.ok(sources.some((s) => s.configMap?.name === "kube-root-ca.crt"));
    assert.ok(sources.some((s) => s.downwardAPI));
    for (const c of pod.containers.filter((x) => x !== sidecar)) {
      assert.ok(!c.volumeMounts?.some((v) => v.name === tokenMount.name), `${c.name} must not get the sidecar's token`);
    }
  } else {
    assert.equal(tokenMount, undefined, "a hand-made token mount would shadow the automounted one");
  }
  // Kubernetes refuses Bidirectional propagation in an unprivileged container.
  for (const c of pod.containers) {
    if (c.volumeMounts?.some((v) => v.mountPropagation === "Bidirectional")) assert.equal(c.securityContext?.privileged, true, c.name);
  }
  return flags;
}

/** DESIGN 4.1 and the auth policy: every flag the sidecar takes. */
export const SIDECAR_FLAGS = new Set([
  "csi-addons-address",
  "node-id",
  "pod",
  "namespace",
  "pod-uid",
  "controller-port",
  "controller-ip",
  "stagingpath",
  "timeout",
  "http-endpoint",
  "kubeconfig",
  "max-inflight",
  "max-queue",
  "log-level",
  "log-format",
  "enable-auth",
  "auth-audience",
  "auth-verb",
  "auth-group",
  "auth-resource",
  "auth-cache-ttl",
  "tls-cert-file",
  "tls-key-file",
  "require-tls-files",
  "shutdown-grace",
  "secret-cache-ttl",
  "leader-election-namespace",
  "leader-election-lease-duration",
  "leader-election-renew-deadline",
  "leader-election-retry-period",
]);

/** The volume types Pod Security "restricted" allows (every other one, hostPath first, is refused). */
const RESTRICTED_VOLUMES = new Set(["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"]);

/**
 * What the Pod Security admission's "restricted" level (which includes "baseline") would refuse in
 * this pod spec, one line per violation; [] = admitted. The rules of the Kubernetes Pod Security
 * Standards that the manifests here can break: host namespaces and ports, privileged, capabilities,
 * volume types, non-root, seccomp, privilege escalation.
 */
export function podSecurityRestrictedViolations(pod: PodSpec): string[] {
  const out: string[] = [];
  for (const f of ["hostNetwork", "hostPID", "hostIPC"] as const) if (pod[f] === true) out.push(`${f}: true`);
  const podSc = pod.securityContext ?? {};
  for (const v of pod.volumes ?? []) {
    const type = Object.keys(v).find((k) => k !== "name");
    if (!type || !RESTRICTED_VOLUMES.has(type)) out.push(`volume ${v.name}: ${type}`);
  }
  const seccompOk = (t?: string) => t === "RuntimeDefault" || t === "Localhost";
  if (podSc.runAsUser === 0) out.push("pod runAsUser: 0");
  for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
    const sc = c.securityContext ?? {};
    if (sc.privileged === true) out.push(`${c.name}: privileged`);
    if (sc.allowPrivilegeEscalation !== false) out.push(`${c.name}: allowPrivilegeEscalation is not false`);
    if (!sc.capabilities?.drop?.includes("ALL")) out.push(`${c.name}: capabilities do not drop ALL`);
    for (const cap of sc.capabilities?.add ?? []) if (cap !== "NET_BIND_SERVICE") out.push(`${c.name}: adds capability ${cap}`);
    if ((sc.runAsNonRoot ?? podSc.runAsNonRoot) !== true) out.push(`${c.name}: runAsNonRoot is not true`);
    if (sc.runAsUser === 0) out.push(`${c.name}: runAsUser: 0`);
    if (!seccompOk(sc.seccompProfile?.type ?? podSc.seccompProfile?.type)) out.push(`${c.name}: no RuntimeDefault or Localhost seccomp profile`);
    for (const p of c.ports ?? []) if (p.hostPort) out.push(`${c.name}: hostPort ${p.hostPort}`);
  }
  return out;
}
