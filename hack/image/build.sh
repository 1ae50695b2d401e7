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

# Fast path: even a fully cached `podman build` re-hashes every COPY source (~10-30 s here). When nothing the build
# reads has changed since this tag was built, keep the image. The inputs hashed are a superset of the build context:
# Dockerfile, .dockerignore, every file under each path its allowlist (`!path` lines) lets in, the base image's id and
# the build arguments. A .dockerignore that is not an allowlist disables the fast path (TSCM_IMAGE_REBUILD=1 too).
inputs_hash() {
  local paths=()
  grep -q '^![^#]*[][*?]' "$REPO_ROOT/.dockerignore" && return 1 # wildcard exceptions: no exact file list
  mapfile -t paths < <(sed -n 's,^!\(..*[^/]\)/*$,\1,p' "$REPO_ROOT/.dockerignore" 2>/dev/null)
  [ ${#paths[@]} -gt 0 ] || return 1
  {
    printf '%s\n' "${base_args[@]}" "$(image_podman image inspect --format '{{.Id}}' "${base_args[1]#BASE_IMAGE=}" 2>/dev/null)"
    cd "$REPO_ROOT" && find Dockerfile .dockerignore "${paths[@]}" -type f -print0 2>/dev/null | LC_ALL=C sort -z \
      | xargs -0 sha256sum
  } | sha256sum | cut -d' ' -f1
}
stamp="$TSCM_IMAGE_CACHE/built/$(printf '%s' "$img" | tr -c 'A-Za-z0-9._-' '_')"
hash=""
[ "${TSCM_IMAGE_REBUILD:-0}" = 1 ] || hash="$(inputs_hash || true)"
if [ -n "$hash" ] && [ -f "$stamp" ] \
  && [ "$(cat "$stamp")" = "$hash $(image_podman image inspect --format '{{.Id}}' "$img" 2>/dev/null)" ]; then
  image_log "$img is up to date (inputs unchanged since it was built; TSCM_IMAGE_REBUILD=1 rebuilds)"
else
  old_id="$(image_podman image inspect --format '{{.Id}}' "$img" 2>/dev/null || true)"
  image_log "podman build -t $img (${base_args[1]})"
  image_podman build --network host "${base_args[@]}" "${secret_args[@]}" -t "$img" -f "$REPO_ROOT/Dockerfile" "$REPO_ROOT"
  new_id="$(image_podman image inspect --format '{{.Id}}' "$img")"
  # The image this tag named before is now untagged: drop it (kept if a container or another tag still uses it).
  # The build stages' cached layers stay: they make the next build fast.
  if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then image_podman rmi "$old_id" > /dev/null 2>&1 || true; fi
  mkdir -p "$(dirname "$stamp")"
  if [ -n "$hash" ]; then echo "$hash $new_id" > "$stamp"; else rm -f "$stamp"; fi
fi
image_log "$img: $(image_podman image inspect --format '{{.Size}}' "$img" | awk '{printf "%.1f MB", $1 / 1e6}') uncompressed"
