#!/usr/bin/env bash
# Makes this machine ready to build and run the container image with podman, idempotently:
#   1. installs podman, buildah, runc, debootstrap and uidmap from Debian when missing (needs root);
#   2. writes a private storage.conf / containers.conf under $TSCM_IMAGE_CACHE (outside the git clone) with the fixes
#      this sandbox needs: runc instead of crun, overlay storage, default ulimits, host networking;
#   3. builds the local Node base image once (hack/image/base.sh; cached by Debian suite + Node version).
# Progress goes to stderr; the last line on stdout is `BASE_IMAGE=<local base image>`.
#
# Usage: hack/image/setup.sh [--no-base]
set -euo pipefail
# shellcheck source=hack/image/lib.sh
. "$(dirname "$0")/lib.sh"

want_base=1
[ "${1:-}" = "--no-base" ] && want_base=0

# --- 1. Debian packages -------------------------------------------------------------------------------------------
missing=()
for pkg in podman buildah runc debootstrap uidmap; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || image_die "missing Debian packages: ${missing[*]} (run this script as root, or install them)"
  image_log "apt-get install ${missing[*]}"
  # Package scripts must not start services here.
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi
  apt_opts=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)
  apt-get "${apt_opts[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  image_log "installed ${missing[*]}"
fi

# --- 2. private podman configuration -------------------------------------------------------------------------------
mkdir -p "$TSCM_IMAGE_CACHE/storage"
image_reset_stale_runroot
write_if_changed() { # file content
  if [ "$(cat "$1" 2>/dev/null)" != "$2" ]; then printf '%s\n' "$2" > "$1.tmp" && mv "$1.tmp" "$1"; fi
}
write_if_changed "$CONTAINERS_STORAGE_CONF" "# Written by hack/image/setup.sh (ts-controller-manager): private podman storage.
[storage]
driver = \"overlay\"
graphroot = \"$TSCM_IMAGE_CACHE/storage\"
runroot = \"$TSCM_IMAGE_RUN/storage\""
write_if_changed "$CONTAINERS_CONF" "# Written by hack/image/setup.sh (ts-controller-manager): private podman configuration.
[containers]
# Root here cannot raise hard rlimits above these, so podman's defaults (taken from its own limits) fail.
default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]
# No bridges or firewall chains: containers share the host's network (servers bind to 127.0.0.1).
netns = \"host\"
log_driver = \"k8s-file\"

[engine]
# crun fails here with 'cgroups in hybrid mode not supported'.
runtime = \"runc\"
cgroup_manager = \"cgroupfs\"
events_logger = \"file\"
tmp_dir = \"$TSCM_IMAGE_RUN/libpod\"
static_dir = \"$TSCM_IMAGE_CACHE/storage/libpod\"
volume_path = \"$TSCM_IMAGE_CACHE/storage/volumes\""

# --- 3. local base image ------------------------------------------------------------------------------------------
if [ "$want_base" = 1 ]; then
  if image_podman image exists "$LOCAL_BASE_IMAGE"; then
    image_log "base image $LOCAL_BASE_IMAGE is cached"
  else
    bash "$IMAGE_HACK_DIR/base.sh"
  fi
  echo "BASE_IMAGE=$LOCAL_BASE_IMAGE"
fi
