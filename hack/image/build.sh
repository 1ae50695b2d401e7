#!/usr/bin/env bash
# Builds the container image: `hack/image/build.sh [IMG]` (default ts-controller-manager:latest); `make docker-build`
# calls it.
#   - docker, when a Docker engine answers (`docker info`): a plain `docker build` (public Node base by default);
#   - podman otherwise, with this project's private podman set-up (hack/image/setup.sh: installs podman when missing,
#     runc, ulimits, host networking) and, as there is no registry here, the locally made Node base image.
# Environment:
#   BUILDER=docker|podman  force one (default: docker if its engine answers, else podman)
#   BASE_IMAGE=...         the Node base (e.g. docker.io/library/node:24-bookworm-slim to use the public one with podman)
#   CA_BUNDLE=...          given to npm as a build secret when the file exists, for TLS-intercepting proxies
#                          (podman only; default /etc/ssl/certs/ca-certificates.crt)
# With podman, run the result through hack/image/podman.sh (same private storage), e.g.
#   hack/image/podman.sh run --rm ts-controller-manager:latest --help
set -euo pipefail
# shellcheck source=hack/image/lib.sh
. "$(dirname "$0")/lib.sh"

img="${1:-${IMG:-ts-controller-manager:latest}}"
ca_bundle="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
base_args=()
[ -n "${BASE_IMAGE:-}" ] && base_args=(--build-arg "BASE_IMAGE=$BASE_IMAGE")

builder="${BUILDER:-}"
if [ -z "$builder" ]; then
  if command -v docker > /dev/null 2>&1 && docker info > /dev/null 2>&1; then builder=docker; else builder=podman; fi
fi
if [ "$builder" = docker ]; then
  image_log "docker build -t $img"
  exec docker build "${base_args[@]}" -t "$img" -f "$REPO_ROOT/Dockerfile" "$REPO_ROOT"
fi
[ "$builder" = podman ] || image_die "BUILDER must be docker or podman, not '$builder'"

if [ -n "${BASE_IMAGE:-}" ]; then
  bash "$IMAGE_HACK_DIR/setup.sh" --no-base
else
  base="$(bash "$IMAGE_HACK_DIR/setup.sh" | tail -n 1)"
  base_args=(--build-arg "BASE_IMAGE=${base#BASE_IMAGE=}")
fi
secret_args=()
[ -s "$ca_bundle" ] && secret_args=(--secret "id=npm_ca,src=$ca_bundle")

image_log "podman build -t $img (${base_args[1]})"
image_podman build --network host "${base_args[@]}" "${secret_args[@]}" -t "$img" -f "$REPO_ROOT/Dockerfile" "$REPO_ROOT"
image_log "built $img: $(image_podman image inspect --format '{{.Size}}' "$img" | awk '{printf "%.1f MB", $1 / 1e6}')"
