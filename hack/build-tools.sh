#!/usr/bin/env bash
# Builds the local control plane's binaries from upstream Go modules (never downloaded release binaries):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok — and cert-manager's controllers
# (hack/tools/cert-manager/main.go over the pinned github.com/cert-manager/cert-manager module) for the metrics
# certificate tests, and its CA injector (hack/tools/cert-manager-cainjector/main.go, the same module) for the chart's
# cert-manager mode on the real node (test/helm.e2e.ts) — and helm (hack/tools/helm: the pinned helm.sh/helm/v4 module's cmd/helm) for the chart in
# dist/chart (test/helm.test.ts, docs/helm.md) — and, with --bench, the controller-runtime Foo controller the benchmarks compare against
# (bench/cr-anchor over the pinned sigs.k8s.io/controller-runtime module; bench/README.md "vs controller-runtime").
#
# Binaries are cached OUTSIDE the git clone, keyed by component, version and a hash of the tools module's go.sum,
# so a second run (or a fresh clone on the same machine) skips the build:
#   $TSCM_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/ts-controller-manager)/bin/<key>/<binary>
# The Go build cache and module cache stay at Go's defaults (also outside the clone).
#
# The Kubernetes version (the version matrix, docs/compatibility.md): the default is the release hack/tools/k8s pins
# (etcd from hack/tools/etcd); KUBERNETES_VERSION=1.34 (or --kubernetes-version=1.34; "v1.34" and "1.34.4" work too)
# builds that minor from its own tools module, hack/tools/k8s-v1.34 (written by hack/tools/gen-k8s-gomod.sh), with the
# etcd line that release links (its go.mod's go.etcd.io/etcd/client/v3: 3.6 → hack/tools/etcd, 3.7 → hack/tools/etcd-v3.7).
# Every version is cached beside the others (bin/k8s-<version>-<hash>/); each k8s directory gets an `etcd` link to the
# etcd it runs with, which pkg/testing/binaries.ts follows.
#
# Usage: hack/build-tools.sh [--print-env] [--no-build] [--control-plane] [--envtest] [--node] [--bench] [--kubernetes-version=V]
#   --print-env      print KEY=DIR lines (ETCD_BIN_DIR, K8S_BIN_DIR, KWOK_BIN_DIR, CERT_MANAGER_BIN_DIR,
#                    CERT_MANAGER_CAINJECTOR_BIN_DIR, HELM_BIN_DIR, NODE_BIN_DIR) on stdout
#   --no-build       fail instead of building what is missing (for callers that only want a cached kubectl)
#   --control-plane  only the local control plane's binaries, not cert-manager nor helm (what `make run` and
#                    `make cluster-up` need; `make tools`, and so `make test`, builds cert-manager and helm too)
#   --envtest        only etcd and kube-apiserver (what startTestEnv, and so test/compat.test.ts, runs; the cheapest
#                    build of another version: `make compat` uses it)
#   --node           also the real node's binaries (CLUSTER_MODE=node, docs/real-node.md): kubelet and kube-proxy
#                    from the k8s module, containerd, its shim, ctr, the CNI plugins and pause from hack/tools/node
#   --bench          also bench/cr-anchor's cr-anchor binary (CR_ANCHOR_BIN_DIR)
#   --kubernetes-version=V  the Kubernetes release to build/find (overrides $KUBERNETES_VERSION; default: hack/tools/k8s's)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
print_env=0 no_build=0 control_plane_only=0 envtest_only=0 node=0 bench=0
requested=${KUBERNETES_VERSION:-}
for arg in "$@"; do
  case "$arg" in
    --print-env) print_env=1 ;;
    --no-build) no_build=1 ;;
    --control-plane) control_plane_only=1 ;;
    --envtest) envtest_only=1 control_plane_only=1 ;;
    --node) node=1 ;;
    --bench) bench=1 ;;
    --kubernetes-version=*) requested=${arg#*=} ;;
    *) echo "usage: $0 [--print-env] [--no-build] [--control-plane] [--envtest] [--node] [--bench] [--kubernetes-version=V]" >&2; exit 2 ;;
  esac
done
cache=${TSCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ts-controller-manager}
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[build-tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'build-tools: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH: install Go >= 1.26 (https://go.dev/dl) or put it on PATH; the local control plane is built from upstream Go modules"
gover=$(go env GOVERSION)
case "$gover" in go1.2[6-9]*|go1.[3-9][0-9]*) ;; *) die "Go $gover is too old: the pinned Kubernetes release needs go >= 1.26 (GOTOOLCHAIN=local)";; esac

# moddir <module>: a tools module's directory (hack/tools/<module>; the bench's anchor lives beside the bench).
moddir() { if [ "$1" = cr-anchor ]; then echo "$here/../bench/cr-anchor"; else echo "$here/tools/$1"; fi; }

# modversion <module dir> <module path>: the pinned version of a module in a tools go.mod.
modversion() { awk -v m="$2" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' "$(moddir "$1")/go.mod"; }

# cachename <module>: the cache directory's prefix — one per component, whichever minor's module built it
# (k8s-v1.34 → k8s, etcd-v3.7 → etcd), so pkg/testing/binaries.ts finds every version under one name.
cachename() { echo "${1%-v[0-9]*}"; }

# key <module dir> <version>: a cache key that changes whenever the pinned module graph (or a tools module's own main
# package, as cert-manager's) changes.
key() { printf '%s-%s' "$2" "$(cd "$(moddir "$1")" && cat go.mod go.sum $(ls ./*.go 2>/dev/null) | sha256sum | cut -c1-12)"; }

# build <module dir> <version> <binary>=<package>...
build() {
  local mod=$1 version=$2; shift 2
  local name; name=$(cachename "$mod")
  local dir="$cache/bin/$name-$(key "$mod" "$version")"
  local missing=()
  for spec in "$@"; do [ -x "$dir/${spec%%=*}" ] || missing+=("$spec"); done
  if [ ${#missing[@]} -eq 0 ]; then log "$mod $version: cached in $dir"; echo "$dir"; return; fi
  [ "$no_build" = 1 ] && die "$mod $version: not built yet (run ${requested:+KUBERNETES_VERSION=$requested }hack/build-tools.sh)"
  mkdir -p "$dir"
  log "$mod $version: downloading modules"
  (cd "$(moddir "$mod")" && go mod download) >&2 || die "$mod $version: could not download Go modules (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
  local ldflags=""
  if [ "$name" = k8s ]; then
    local minor=${version#v1.}; minor=${minor%%.*}
    ldflags="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  elif [ "$mod" = cert-manager ] || [ "$mod" = cert-manager-cainjector ]; then
    ldflags="-X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$version"
  elif [ "$mod" = helm ]; then
    ldflags="-X helm.sh/helm/v4/internal/version.version=$version -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  elif [ "$mod" = node ]; then
    ldflags="-X github.com/containerd/containerd/v2/version.Version=$version"
  fi
  # containerd's btrfs snapshotter needs cgo; the node uses overlayfs.
  local tags=""
  [ "$mod" = node ] && tags="no_btrfs"
  for spec in "${missing[@]}"; do
    local bin=${spec%%=*} pkg=${spec#*=} t0=$SECONDS
    log "$mod $version: building $bin ($pkg) ..."
    (cd "$(moddir "$mod")" && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$dir/$bin.tmp" "$pkg") >&2 || die "$mod $version: building $bin failed"
    mv "$dir/$bin.tmp" "$dir/$bin"
    log "$mod $version: built $bin in $((SECONDS - t0))s"
  done
  echo "$dir"
}

t_all=$SECONDS
# The Kubernetes tools module of the version asked for (see the top), and the etcd module of the line it links.
k8s_mod=k8s
if [ -n "$requested" ]; then
  want=${requested#v}
  [[ "$want" =~ ^1\.[0-9]+(\.[0-9]+)?$ ]] || die "KUBERNETES_VERSION=$requested: expected a Kubernetes release such as 1.34, v1.34 or v1.34.4"
  minor=$(echo "$want" | cut -d. -f1,2)
  default_version=$(modversion k8s k8s.io/kubernetes)
  if [[ "$default_version" != "v$minor."* ]]; then
    k8s_mod=k8s-v$minor
    [ -f "$(moddir "$k8s_mod")/go.mod" ] || die "Kubernetes $minor is not in the version matrix: hack/tools has $(cd "$here/tools" && ls -d k8s-v* 2>/dev/null | tr '\n' ' ')and k8s ($default_version); hack/tools/gen-k8s-gomod.sh 1.X.Y writes a minor's module"
  fi
  pinned=$(modversion "$k8s_mod" k8s.io/kubernetes)
  [ "$want" = "$minor" ] || [ "v$want" = "$pinned" ] || die "KUBERNETES_VERSION=$requested: hack/tools/$k8s_mod pins $pinned (one patch per minor; regenerate it with hack/tools/gen-k8s-gomod.sh ${want})"
fi
k8s_version=$(modversion "$k8s_mod" k8s.io/kubernetes)
etcd_line=$(modversion "$k8s_mod" go.etcd.io/etcd/client/v3 | cut -d. -f1,2)
etcd_mod=etcd
case "$(modversion etcd go.etcd.io/etcd/server/v3)" in "$etcd_line".*) ;; *) etcd_mod=etcd-$etcd_line ;; esac
[ -f "$(moddir "$etcd_mod")/go.mod" ] || die "Kubernetes $k8s_version links etcd $etcd_line: no hack/tools/$etcd_mod/go.mod builds that line"
etcd_version=$(modversion "$etcd_mod" go.etcd.io/etcd/server/v3)
kwok_version=$(modversion kwok sigs.k8s.io/kwok)
cert_manager_version=$(modversion cert-manager github.com/cert-manager/cert-manager)
helm_version=$(modversion helm helm.sh/helm/v4)

etcd_dir=$(build "$etcd_mod" "$etcd_version" etcd=go.etcd.io/etcd/server/v3)
k8s_bins=(kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver)
[ "$envtest_only" = 1 ] || k8s_bins+=(
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
  kubectl=k8s.io/kubernetes/cmd/kubectl)
# The real node (CLUSTER_MODE=node, docs/real-node.md): kubelet and kube-proxy from the same pinned release.
[ "$node" = 0 ] || k8s_bins+=(kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy)
k8s_dir=$(build "$k8s_mod" "$k8s_version" "${k8s_bins[@]}")
# The etcd this release runs with, beside it (pkg/testing/binaries.ts pairs them through this link).
[ "$(readlink "$k8s_dir/etcd" 2>/dev/null)" = "$etcd_dir/etcd" ] || ln -sfn "$etcd_dir/etcd" "$k8s_dir/etcd"
kwok_dir=""
[ "$envtest_only" = 1 ] || kwok_dir=$(build kwok "$kwok_version" kwok=sigs.k8s.io/kwok/cmd/kwok)
# The standalone kwok binary needs Stage objects in its config (kwokctl embeds these defaults): node initialise,
# lease heartbeat, and the fast pod lifecycle (Ready, Complete, Delete). Taken from the pinned module itself.
if [ -n "$kwok_dir" ] && [ ! -s "$kwok_dir/stages.yaml" ]; then
  kwok_src=$(cd "$here/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) || die "kwok $kwok_version: module source not found"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo '---'; cat "$kwok_src/kustomize/stage/$f"
  done > "$kwok_dir/stages.yaml.tmp"
  mv "$kwok_dir/stages.yaml.tmp" "$kwok_dir/stages.yaml"
fi
# The real node's runtime and CNI plugins (hack/tools/node, docs/real-node.md); pause is the module's own main package.
node_dir=""
containerd_version=$(modversion node github.com/containerd/containerd/v2)
[ "$node" = 0 ] || node_dir=$(build node "$containerd_version" \
  containerd=github.com/containerd/containerd/v2/cmd/containerd \
  containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  ctr=github.com/containerd/containerd/v2/cmd/ctr \
  bridge=github.com/containernetworking/plugins/plugins/main/bridge \
  host-local=github.com/containernetworking/plugins/plugins/ipam/host-local \
  loopback=github.com/containernetworking/plugins/plugins/main/loopback \
  portmap=github.com/containernetworking/plugins/plugins/meta/portmap \
  pause=.)
cert_manager_dir=""
[ "$control_plane_only" = 1 ] || cert_manager_dir=$(build cert-manager "$cert_manager_version" cert-manager-controller=.)
# Its CRDs come from the same pinned module (plain YAML in deploy/crds), copied next to the binary so the tests need
# neither the module cache nor a committed copy.
if [ -n "$cert_manager_dir" ] && [ ! -s "$cert_manager_dir/crds.yaml" ]; then
  cm_src=$(cd "$here/tools/cert-manager" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager) || die "cert-manager $cert_manager_version: module source not found"
  for f in "$cm_src"/deploy/crds/*.yaml; do echo '---'; cat "$f"; done > "$cert_manager_dir/crds.yaml.tmp"
  mv "$cert_manager_dir/crds.yaml.tmp" "$cert_manager_dir/crds.yaml"
fi
# cert-manager's CA injector: its own tools module (adding it left cert-manager-controller's cache key alone).
cert_manager_cainjector_dir=""
[ "$control_plane_only" = 1 ] || cert_manager_cainjector_dir=$(build cert-manager-cainjector \
  "$(modversion cert-manager-cainjector github.com/cert-manager/cert-manager)" cert-manager-cainjector=.)
# helm, for the chart (dist/chart): rendered against kustomize's output, linted and installed by the tests.
helm_dir=""
[ "$control_plane_only" = 1 ] || helm_dir=$(build helm "$helm_version" helm=helm.sh/helm/v4/cmd/helm)
# The bench's controller-runtime anchor (bench/cr-anchor): its main package is the module itself.
cr_anchor_dir=""
[ "$bench" = 0 ] || cr_anchor_dir=$(build cr-anchor "$(modversion cr-anchor sigs.k8s.io/controller-runtime)" cr-anchor=.)
log "all binaries ready in $((SECONDS - t_all))s"

if [ "$print_env" = 1 ]; then
  echo "ETCD_BIN_DIR=$etcd_dir"
  echo "K8S_BIN_DIR=$k8s_dir"
  [ -z "$kwok_dir" ] || echo "KWOK_BIN_DIR=$kwok_dir"
  [ -z "$cert_manager_dir" ] || echo "CERT_MANAGER_BIN_DIR=$cert_manager_dir"
  [ -z "$cert_manager_cainjector_dir" ] || echo "CERT_MANAGER_CAINJECTOR_BIN_DIR=$cert_manager_cainjector_dir"
  [ -z "$helm_dir" ] || echo "HELM_BIN_DIR=$helm_dir"
  [ -z "$node_dir" ] || echo "NODE_BIN_DIR=$node_dir"
  [ -z "$cr_anchor_dir" ] || echo "CR_ANCHOR_BIN_DIR=$cr_anchor_dir"
fi
