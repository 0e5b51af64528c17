// What the image runs, so that the bench measures the same thing: the bundled sidecar (npm run
// bundle) under the V8 flags of the image's entrypoint (the Dockerfile test holds them equal).
//   --max-semi-space-size=1: V8's young generation grows to 3 x 16 MiB under load and stays
//   committed; a relay allocates little that survives, so 1 MiB semi-spaces cost a few more
//   scavenges and save most of that resident memory (idle and in a burst).
export const SIDECAR_BUNDLE = "dist/csi-addons-sidecar.mjs";
export const SIDECAR_NODE_FLAGS = ["--max-semi-space-size=1"];
