#!/usr/bin/env bash
# podman with this project's private configuration and storage (see hack/image/setup.sh, which must have run once):
#   hack/image/podman.sh images
#   hack/image/podman.sh run --rm --network host ts-controller-manager:dev --help
set -euo pipefail
# shellcheck source=hack/image/lib.sh
. "$(dirname "$0")/lib.sh"
[ -f "$CONTAINERS_CONF" ] || image_die "no podman configuration at $CONTAINERS_CONF: run hack/image/setup.sh first"
image_reset_stale_runroot
exec podman "$@"
