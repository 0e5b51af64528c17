// Run by kube-connections.test.ts as a program of its own: writes N Events (default 3), one after
// another, through the controller's client to the API server of the kubeconfig given, prints
// "written", and returns without closing anything — so the test sees whether an idle connection
// keeps a finished program running.
import { createKubeWrites, loadKubeConfig } from "../../controller/kube/client.js";

const kube = createKubeWrites(loadKubeConfig(process.argv[2]));
const count = Number(process.argv[3] ?? 3);
for (let i = 0; i < count; i++) {
  await kube.createEvent(
    "default",
    {
      involved: { kind: "PersistentVolume", apiVersion: "v1", namespace: undefined, name: `pv-exit-${i}`, uid: `uid-exit-${i}` },
      type: "Normal",
      reason: "VolumeHealed",
      message: "volume healed",
    },
    AbortSignal.timeout(5_000),
  );
}
console.log("written");
