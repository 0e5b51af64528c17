// What the image runs, so that the bench measures the same thing: the bundled sidecar (npm run
// bundle) under the V8 flags of the image's entrypoint (the Dockerfile test holds them equal).
//   --max-semi-space-size=4: V8 lets the young generation grow to 2 x 16 MiB semi-spaces under
//   load and keeps them committed (seen: 16 MiB new space at idle after start-up). 4 MiB caps that
//   at 8 MiB. 1 MiB saved more but, with 64 calls in flight, promoted live call state early and
//   cost noticeably more CPU per call in a profile on the (loaded) bench machine.
export const SIDECAR_BUNDLE = "dist/csi-addons-sidecar.mjs";
export const SIDECAR_NODE_FLAGS = ["--max-semi-space-size=4"];
