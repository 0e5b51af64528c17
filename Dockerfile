# syntax=docker/dockerfile:1
# The csi-addons-healer image: the sidecar (entrypoint) and the reference driver-stub, one package.
#
#   docker build -t <registry>/csi-addons-healer:<tag> .
#
# Runtime base: node:20-bookworm-slim rather than distroless nodejs20. Distroless is smaller and
# has no shell, but the example DaemonSet runs the driver-stub from this image behind
# `sh -c "umask 0007 && exec ..."` (so the non-root sidecar may dial its socket), and operators
# debugging a node plugin can `kubectl exec` into it. The runtime stage still drops npm, npx,
# corepack and yarn, and runs as the unprivileged uid 65532 by default.
# Pin the base by digest for reproducible builds: --build-arg NODE_IMAGE=node:20-bookworm-slim@sha256:...
ARG NODE_IMAGE=node:20-bookworm-slim

# --- build: compile TypeScript to dist/ ---------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: "prepare" would run the build before the sources are here; no dependency
# needs an install script to compile (proto/gen is committed, buf is not run).
RUN npm ci --ignore-scripts --omit=optional --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY proto/ proto/
COPY common/ common/
COPY sidecar/ sidecar/
COPY controller/ controller/
COPY driver-stub/ driver-stub/
RUN npm run build
# What ships besides node_modules: the compiled code, the launchers, package.json (the version the
# binaries print) and the .proto contracts (the sidecar loads them for gRPC reflection); not the
# generated TypeScript under proto/gen.
COPY bin/ bin/
RUN mkdir /out \
 && cp -r dist bin package.json /out/ \
 && tar -cf - --exclude=proto/gen proto | tar -xf - -C /out

# --- deps: production dependencies only -----------------------------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: "prepare" (the TypeScript build) needs dev dependencies and is done above.
# --omit=optional: the optional dependencies are the pinned Node runtime for npm scripts on a
# developer machine; the image has its own Node.
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

# --- runtime ------------------------------------------------------------------------------------
FROM ${NODE_IMAGE}
# Package managers are not needed at run time; removing them takes their code out of reach.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules/ node_modules/
COPY --from=build /out/ ./
# 9070: controller gRPC (TLS); 9808: /healthz, /readyz, /metrics when --http-endpoint=:9808.
EXPOSE 9070 9808
USER 65532:65532
ENTRYPOINT ["node", "/app/bin/csi-addons-sidecar.js"]
