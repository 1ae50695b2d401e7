#!/usr/bin/env bash
# Packs static binaries as a one-layer OCI image archive (OCI image layout in a tar) that `ctr images import`
# loads — how the real node gets its sandbox image (pause) without any registry.
#
# Usage: hack/node/oci-image.sh <image ref> <out.tar> <entrypoint path in image> <host file>=<path in image>...
#   e.g. hack/node/oci-image.sh registry.k8s.io/pause:3.10.1 pause.tar /pause "$NODE_BIN_DIR/pause=/pause"
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 <ref> <out.tar> <entrypoint> <file>=<path>..." >&2; exit 2; }
ref=$1 out=$2 entry=$3; shift 3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs" "$work/layout/blobs/sha256"
for spec in "$@"; do
  src=${spec%%=*} dst=${spec#*=}
  mkdir -p "$work/rootfs$(dirname "$dst")"
  install -m 0755 "$src" "$work/rootfs$dst"
done
blob() { # file mediaType → prints a descriptor, stores the blob
  local d; d=$(sha256sum "$1" | cut -d' ' -f1)
  cp "$1" "$work/layout/blobs/sha256/$d"
  printf '{"mediaType":"%s","digest":"sha256:%s","size":%s}' "$2" "$d" "$(stat -c %s "$1")"
}
tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C "$work/rootfs" -cf "$work/layer.tar" .
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
layer=$(blob "$work/layer.tar" application/vnd.oci.image.layer.v1.tar)
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["%s"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$entry" "$diff_id" > "$work/config.json"
config=$(blob "$work/config.json" application/vnd.oci.image.config.v1+json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":%s,"layers":[%s]}' \
  "$config" "$layer" > "$work/manifest.json"
manifest=$(blob "$work/manifest.json" application/vnd.oci.image.manifest.v1+json)
printf '{"schemaVersion":2,"manifests":[%s]}' \
  "${manifest%\}},\"annotations\":{\"io.containerd.image.name\":\"$ref\",\"org.opencontainers.image.ref.name\":\"${ref##*:}\"}}" \
  > "$work/layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' > "$work/layout/oci-layout"
tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C "$work/layout" -cf "$out.tmp" .
mv "$out.tmp" "$out"
