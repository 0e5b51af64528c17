# syntax=docker/dockerfile:1
# Two images from one build: the csi-addons-healer sidecar (the default, last target "sidecar") and
# the reference driver-stub (target "driver-stub"), for demos and driver authors only. Build both,
# for amd64 and arm64, with scripts/build-image.sh; by hand:
#
#   docker buildx build --platform linux/amd64,linux/arm64 --target sidecar -t <registry>/csi-addons-healer:<tag> .
#   docker buildx build --platform linux/amd64,linux/arm64 --target driver-stub -t <registry>/csi-addons-healer-driver-stub:<tag> .
#
# Bases, pinned by digest at build time: scripts/build-image.sh resolves each tag below to the digest
# of its multi-arch index (`docker buildx imagetools inspect`) and passes
# --build-arg NODE_IMAGE=<tag>@sha256:... (and RUNTIME_IMAGE=...), and records the digest in the
# image's org.opencontainers.image.base.* labels. The defaults here are tags because no digest
# could be looked up where this file was written; a build without the script is unpinned.
# - NODE_IMAGE: Node 24 (the current LTS) on Debian bookworm, for compiling and installing, and as
#   the driver-stub's runtime (its example DaemonSet wraps it in `sh -c "umask 0007 && exec ..."`).
# - RUNTIME_IMAGE: the sidecar's runtime, distroless: Node 24 and glibc, no shell, no package
#   manager, user 65532 ("nonroot"). Same Debian release as NODE_IMAGE, so what is built there (pure
#   JavaScript: no native modules) runs here.
ARG NODE_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12:nonroot

# --- build: compile TypeScript to dist/ ---------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: "prepare" would run the build before the sources are here; no dependency
# needs an install script to compile (proto/gen is committed, buf is not run).
# Optional dependencies stay in this stage: esbuild's platform binary (@esbuild/linux-<arch>) is one.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY proto/ proto/
COPY common/ common/
COPY sidecar/ sidecar/
COPY controller/ controller/
COPY driver-stub/ driver-stub/
# --sourceMap false: the image carries no TypeScript sources, so maps would point at nothing.
# npm run build also bundles the sidecar and the controller (scripts/bundle.mjs):
# dist/csi-addons-sidecar.mjs, dist/csi-addons-healer-controller.mjs, the chunks they load when
# needed (dist/<program>-*.mjs) and dist/vendor/.
COPY scripts/bundle.mjs scripts/
RUN npm run build -- --sourceMap false
# What ships: the compiled code, the launchers, package.json (the version the binaries print) and
# the .proto contracts (the sidecar loads them for gRPC reflection); not the generated TypeScript
# under proto/gen. The sidecar image gets the two bundles and no node_modules (everything they run
# is inside them), and no driver-stub code; it carries the healer controller too (same code base,
# entry point bin/csi-addons-healer-controller.js). The driver-stub image gets its compiled
# modules and the production node_modules.
COPY bin/ bin/
RUN mkdir -p /out/sidecar/bin /out/sidecar/dist /out/compile-cache \
 && mkdir -p /out/driver-stub/bin /out/driver-stub/dist \
 && tar -cf - --exclude=proto/gen proto | tar -xf - -C /out/sidecar \
 && cp -r dist/csi-addons-sidecar*.mjs dist/csi-addons-healer-controller*.mjs dist/vendor /out/sidecar/dist/ \
 && cp bin/csi-addons-sidecar.js bin/csi-addons-healer-controller.js bin/heap-defaults.js /out/sidecar/bin/ \
 && cp package.json /out/sidecar/ \
 && cp -r dist/driver-stub dist/proto /out/driver-stub/dist/ \
 && cp bin/csi-addons-driver-stub.js /out/driver-stub/bin/ \
 && cp package.json /out/driver-stub/

# --- deps: production dependencies only, for the driver-stub ------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: "prepare" (the TypeScript build) needs dev dependencies and is done above.
# --omit=optional: the optional dependencies are the pinned Node runtime for npm scripts on a
# developer machine; the image has its own Node.
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

# --- driver-stub: the reference driver, never part of the sidecar image ----------------------------
FROM ${NODE_IMAGE} AS driver-stub
ARG VERSION=dev
ARG SOURCE=unknown
ARG REVISION=unknown
ARG CREATED=unknown
ARG NODE_IMAGE
ARG NODE_IMAGE_DIGEST=unknown
LABEL org.opencontainers.image.title="csi-addons-healer-driver-stub" \
      org.opencontainers.image.description="Reference CSI-Addons driver (healer.v1) for tests, demos and driver authors; not for production" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${NODE_IMAGE}" \
      org.opencontainers.image.base.digest="${NODE_IMAGE_DIGEST}"
# Package managers are not needed at run time; removing them takes their code out of reach.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-*
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules/ node_modules/
COPY --from=build /out/driver-stub/ ./
# It has no default user of its own: the example DaemonSet runs it as a non-root user it names.
ENTRYPOINT ["node", "/app/bin/csi-addons-driver-stub.js"]

# --- compile-cache: V8's compiled code for the programs' start-up ---------------------------------
# Node keeps V8's compiled code of each module in the folder NODE_COMPILE_CACHE names; the sidecar
# and the controller read this one at every start instead of compiling their bundles (5-20 ms less
# from start to SERVING for the sidecar, measured: deploy/README.md, "1. Build the images", and
# docs/decisions/bundled-programs.md; ~30 ms for the controller's --version). A cache is valid
# only for the Node binary and the user id that made it, so it is made here, in the runtime image,
# as the programs' user: by running each once (--version loads and compiles the bundle, then
# exits). The sidecar stage copies the folder and runs nothing.
FROM ${RUNTIME_IMAGE} AS compile-cache
WORKDIR /app
COPY --from=build /out/sidecar/ ./
COPY --from=build --chown=65532:65532 /out/compile-cache/ .compile-cache/
USER 65532:65532
ENV NODE_ENV=production
ENV NODE_COMPILE_CACHE=/app/.compile-cache
RUN ["/nodejs/bin/node", "/app/bin/csi-addons-sidecar.js", "--version"]
RUN ["/nodejs/bin/node", "/app/bin/csi-addons-healer-controller.js", "--version"]

# --- sidecar (default target) --------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS sidecar
ARG VERSION=dev
ARG SOURCE=unknown
ARG REVISION=unknown
ARG CREATED=unknown
ARG RUNTIME_IMAGE
ARG RUNTIME_IMAGE_DIGEST=unknown
LABEL org.opencontainers.image.title="csi-addons-healer" \
      org.opencontainers.image.description="CSI-Addons sidecar that relays volume-healing calls to a CSI driver's CSI-Addons server" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${RUNTIME_IMAGE}" \
      org.opencontainers.image.base.digest="${RUNTIME_IMAGE_DIGEST}"
ENV NODE_ENV=production
# The compile cache from the stage above. Under another user id, or when the cache does not match,
# Node compiles as it would without one; it cannot write here with the deployments' read-only root.
ENV NODE_COMPILE_CACHE=/app/.compile-cache
WORKDIR /app
COPY --from=build /out/sidecar/ ./
COPY --from=compile-cache --chown=65532:65532 /app/.compile-cache/ .compile-cache/
# 9070: controller gRPC (TLS); 9072: /healthz, /readyz, /metrics when --http-endpoint=:9072.
EXPOSE 9070 9072
USER 65532:65532
# Distroless has no PATH lookup through a shell; its Node is /nodejs/bin/node. No V8 flags here:
# the command line would win over NODE_OPTIONS. Each bin/ script applies its program's heap caps
# itself when neither NODE_OPTIONS nor the command line gives them (bin/heap-defaults.js).
ENTRYPOINT ["/nodejs/bin/node", "/app/bin/csi-addons-sidecar.js"]
