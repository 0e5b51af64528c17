// common/kube/pod-claims: which claims a Pod uses, read-only or not, and how its running
// containers see a mount made again (their weakest mountPropagation).
import { test } from "node:test";
import assert from "node:assert/strict";
import { claimUsesOfPod, claimsOfPod, weakerPropagation, type PodVolumes } from "../../../../common/kube/pod-claims.js";

const mount = (name: string, mountPropagation?: string) => ({ name, ...(mountPropagation ? { mountPropagation } : {}) });

test("each claim with its read-only flag and the weakest propagation of the containers that mount it", () => {
  const pod: PodVolumes = {
    metadata: { name: "web", namespace: "apps", uid: "u" },
    spec: {
      volumes: [
        { name: "data", persistentVolumeClaim: { claimName: "data-claim" } },
        { name: "logs", persistentVolumeClaim: { claimName: "logs-claim", readOnly: true } },
        { name: "scratch", ephemeral: {} },
        { name: "both", persistentVolumeClaim: { claimName: "both-claim" } },
        { name: "unused", persistentVolumeClaim: { claimName: "unused-claim" } },
      ],
      containers: [
        { volumeMounts: [mount("data", "HostToContainer"), mount("logs", "Bidirectional"), mount("both", "Bidirectional")] },
        { volumeMounts: [mount("scratch", "HostToContainer"), mount("both")] },
      ],
      // Finished init containers hold no mount; a restartable one (a sidecar container) runs on.
      initContainers: [{ volumeMounts: [mount("data")] }, { restartPolicy: "Always", volumeMounts: [mount("logs", "HostToContainer")] }],
    },
    status: { phase: "Running" },
  };
  assert.deepEqual(claimUsesOfPod(pod), [
    { claim: "apps/data-claim", readOnly: false, propagation: "HostToContainer" },
    { claim: "apps/logs-claim", readOnly: true, propagation: "HostToContainer" },
    { claim: "apps/web-scratch", readOnly: false, propagation: "HostToContainer" },
    // One container without propagation keeps the dead mount: the pod as a whole does.
    { claim: "apps/both-claim", readOnly: false, propagation: "None" },
    { claim: "apps/unused-claim", readOnly: false, propagation: "None" },
  ]);
  assert.deepEqual(claimsOfPod(pod), ["apps/data-claim", "apps/logs-claim", "apps/web-scratch", "apps/both-claim", "apps/unused-claim"]);
});

test("an unknown propagation is None; a finished pod uses nothing", () => {
  const pod = (phase: string, p: string): PodVolumes => ({
    metadata: { name: "p", namespace: "n" },
    spec: { volumes: [{ name: "v", persistentVolumeClaim: { claimName: "c" } }], containers: [{ volumeMounts: [mount("v", p)] }] },
    status: { phase },
  });
  assert.equal(claimUsesOfPod(pod("Running", "Sideways"))[0]!.propagation, "None");
  assert.deepEqual(claimUsesOfPod(pod("Succeeded", "HostToContainer")), []);
  assert.deepEqual(claimUsesOfPod(pod("Failed", "HostToContainer")), []);
  assert.equal(weakerPropagation("Bidirectional", "HostToContainer"), "HostToContainer");
  assert.equal(weakerPropagation("None", "Bidirectional"), "None");
});
