#!/usr/bin/env bash
# Builds the two images, each for linux/amd64 and linux/arm64 (the code is pure JavaScript: no
# native modules, so no emulation surprises), with every base image pinned by digest:
#   <repository>/csi-addons-healer:<tag>              the sidecar (Dockerfile target "sidecar")
#   <repository>/csi-addons-healer-driver-stub:<tag>  the reference driver (target "driver-stub")
#
# usage: scripts/build-image.sh <repository> <tag> [--push | --load]
#   --push (default)  build both platforms and push them as one multi-arch index per image
#   --load            load into the local Docker image store; only one platform (PLATFORMS=linux/amd64)
# environment: PLATFORMS (default linux/amd64,linux/arm64), NODE_IMAGE, RUNTIME_IMAGE (base tags to
# resolve; defaults as in the Dockerfile).
#
# Needs docker with buildx, a builder that can build for both platforms (docker buildx create
# --use, plus QEMU binfmt for the other architecture's RUN steps), and access to the registries.
set -euo pipefail

usage() { echo "usage: $0 <repository> <tag> [--push | --load]" >&2; exit 2; }
[[ $# -ge 2 && $# -le 3 ]] || usage
repository=$1
tag=$2
output=${3:---push}
[[ $output == --push || $output == --load ]] || usage
platforms=${PLATFORMS:-linux/amd64,linux/arm64}
if [[ $output == --load && $platforms == *,* ]]; then
  echo "$0: --load takes one platform (the local image store holds no multi-arch index): set PLATFORMS" >&2
  exit 2
fi
node_image=${NODE_IMAGE:-node:24-bookworm-slim}
runtime_image=${RUNTIME_IMAGE:-gcr.io/distroless/nodejs24-debian12:nonroot}

# The digest of a tag's multi-arch index, so that every platform's build uses the same base.
digest() {
  local d
  d=$(docker buildx imagetools inspect "$1" --format '{{.Manifest.Digest}}')
  [[ $d =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "$0: cannot resolve $1 to a digest (got '$d')" >&2; exit 1; }
  echo "$d"
}
node_digest=$(digest "$node_image")
runtime_digest=$(digest "$runtime_image")
echo "bases: $node_image@$node_digest, $runtime_image@$runtime_digest" >&2

root=$(cd "$(dirname "$0")/.." && pwd)
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
source=$(git -C "$root" remote get-url origin 2>/dev/null || echo unknown)
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)

build() { # target image
  docker buildx build "$root" \
    --platform "$platforms" \
    --target "$1" \
    --tag "$repository/$2:$tag" \
    --build-arg "NODE_IMAGE=$node_image@$node_digest" \
    --build-arg "NODE_IMAGE_DIGEST=$node_digest" \
    --build-arg "RUNTIME_IMAGE=$runtime_image@$runtime_digest" \
    --build-arg "RUNTIME_IMAGE_DIGEST=$runtime_digest" \
    --build-arg "VERSION=$tag" \
    --build-arg "REVISION=$revision" \
    --build-arg "SOURCE=$source" \
    --build-arg "CREATED=$created" \
    "$output"
}
build sidecar csi-addons-healer
build driver-stub csi-addons-healer-driver-stub
