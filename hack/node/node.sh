#!/usr/bin/env bash
# System side of the local control plane's real node (CLUSTER_MODE=node, docs/real-node.md). Needs root.
#
#   node.sh up <dir>     installs runc and iptables from Debian when missing; network namespace tscm-node with a veth pair to the host (host 172.31.250.1/30, node
#                        172.31.250.2/30, default route via the host), IP forwarding inside it, and the kubelet's
#                        cgroup root /tscm-node in every cgroup v1 hierarchy (cpuset copied from the parent).
#                        It records the node's owner in /run/tscm-node.owner: $TSCM_NODE_OWNER_PID, default the
#                        process that ran it (the test runner holding the node); 0 = none, the node lives until
#                        `down` (`make cluster-up`). A node whose owner is gone (a run killed before `down`) is
#                        reclaimed: the processes in its namespace and its control plane's (<dir>/state.json, each
#                        checked to name <dir> on its command line) killed, `down` run on its directory, one line on
#                        stderr. A node whose owner lives, or that has no owner, is refused (exit 1).
#   node.sh down <dir>   kills everything left in /tscm-node's cgroups (Pod containers outlive the kubelet) and the
#                        containerd shims serving <dir>'s socket, unmounts whatever is mounted below <dir> (overlay
#                        rootfs, projected-volume tmpfs, netns bind mounts), removes the cgroups and the namespace.
#
# Everything the node does to networking (the Pods' bridge cni0, kube-proxy's and the bridge plugin's iptables
# rules, ip_forward) happens inside the namespace: the host only gets the veth end tscm-node0. One node per machine.
set -euo pipefail
NETNS=tscm-node HOST_IF=tscm-node0 HOST_IP=172.31.250.1 NODE_IP=172.31.250.2 CGROOT=tscm-node
cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 up|down <dir>" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "node.sh: the real node needs root (network namespaces, cgroups, mounts)" >&2; exit 1; }

hierarchies() { for h in /sys/fs/cgroup/*/; do [ -e "$h/cgroup.procs" ] && echo "${h%/}"; done; }
OWNER_FILE=/run/tscm-node.owner
# A process's start time (clock ticks since boot, /proc/<pid>/stat field 22): with the pid, names one process for good.
start_time() { [ -r "/proc/$1/stat" ] && sed 's/.*) //' "/proc/$1/stat" | awk '{print $20}'; }

case "$cmd" in
  up)
    # Debian packages the node uses: runc (containerd's runtime) and iptables (kube-proxy, the bridge plugin's NAT).
    missing=()
    for pkg in runc iptables; do
      dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
      echo "node.sh: apt-get install ${missing[*]}" >&2
      if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi
      apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
    fi
    if ip netns list | grep -qw "$NETNS"; then
      opid='' ostart='' odir=''
      [ -r "$OWNER_FILE" ] && read -r opid ostart odir < "$OWNER_FILE"
      if [ "$opid" = 0 ]; then
        echo "node.sh: network namespace $NETNS exists: the node of $odir runs until it is stopped (make cluster-down CLUSTER_DIR=$odir)" >&2; exit 1
      fi
      if [ -n "$opid" ] && [ "$(start_time "$opid" || true)" = "$ostart" ]; then
        echo "node.sh: network namespace $NETNS exists: the node of pid $opid ($odir) is running (or run: $0 down $odir)" >&2; exit 1
      fi
      if [ -z "$opid" ] && [ -n "$(ip netns pids "$NETNS")" ]; then
        echo "node.sh: network namespace $NETNS exists with processes in it and no owner recorded: another node is running (or run: $0 down <its dir>)" >&2; exit 1
      fi
      # Its owner is gone. Its components were spawned detached, so they may outlive it: kill its control plane's
      # (only processes whose command line names its directory: a recorded pid may have been reused) and whatever is
      # in the namespace (containerd, the kubelet, kube-proxy), then take the rest down.
      echo "node.sh: reclaiming the node left by a run that ended without 'down' (owner pid ${opid:-unrecorded}, ${odir:-directory unrecorded})" >&2
      if [ -n "$odir" ] && [ -r "$odir/state.json" ]; then
        for p in $(grep -o '"pid": *[0-9]*' "$odir/state.json" | grep -o '[0-9]*$'); do
          tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -qF "$odir/" && kill -9 "$p" 2>/dev/null || true
        done
      fi
      for _ in 1 2 3 4 5; do
        pids=$(ip netns pids "$NETNS")
        [ -z "$pids" ] && break
        kill -9 $pids 2>/dev/null || true
        sleep 0.2
      done
      bash "$0" down "${odir:-/nonexistent/tscm-node}"
    fi
    ip netns add "$NETNS"
    owner=${TSCM_NODE_OWNER_PID:-$PPID}
    if [ "$owner" = 0 ]; then echo "0 0 $dir" > "$OWNER_FILE"; else echo "$owner $(start_time "$owner") $dir" > "$OWNER_FILE"; fi
    trap 'ip netns del "$NETNS" 2>/dev/null || true' ERR
    ip link add "$HOST_IF" type veth peer name eth0 netns "$NETNS"
    ip addr add "$HOST_IP/30" dev "$HOST_IF"
    ip link set "$HOST_IF" up
    ip -n "$NETNS" link set lo up
    ip -n "$NETNS" addr add "$NODE_IP/30" dev eth0
    ip -n "$NETNS" link set eth0 up
    ip -n "$NETNS" route add default via "$HOST_IP"
    # The node-mode API server (on the host) calls webhooks through their Service's ClusterIP (its default service
    # resolver): route the Service range (--service-cluster-ip-range of pkg/testing/controlplane.ts) into the node,
    # where kube-proxy's rules forward it to the Pod. Gone with the veth on `down`.
    ip route add 10.0.0.0/24 via "$NODE_IP" dev "$HOST_IF"
    ip netns exec "$NETNS" sysctl -qw net.ipv4.ip_forward=1
    # No ICMP redirects from the node: a packet the host sends to a ClusterIP kube-proxy does not DNAT (a Service
    # without endpoints) goes back out eth0, so the node sent the host a redirect for each, and each redirect restarted
    # the per-destination ICMP rate limit that kube-proxy's REJECT (port unreachable) goes through too (the node's
    # OutRateLimitHost counted them): the API server's call to a Service without endpoints got no answer until its
    # webhook timeout, where a cluster refuses it at once.
    ip netns exec "$NETNS" sysctl -qw net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.eth0.send_redirects=0
    for h in $(hierarchies); do
      mkdir -p "$h/$CGROOT"
      if [ -e "$h/cpuset.cpus" ]; then
        cat "$h/cpuset.cpus" > "$h/$CGROOT/cpuset.cpus"; cat "$h/cpuset.mems" > "$h/$CGROOT/cpuset.mems"
      fi
    done
    ;;
  down)
    # Pod processes first (freeze-free: SIGKILL until the cgroups are empty), then the shims of this node's containerd.
    for _ in 1 2 3 4 5; do
      # `if`, not `&&`: with pipefail a hierarchy without the cgroup (already removed) must not fail the pipeline and,
      # through `set -e`, end `down` before the namespace and the owner record go.
      pids=$(for h in $(hierarchies); do if [ -d "$h/$CGROOT" ]; then find "$h/$CGROOT" -name cgroup.procs -exec cat {} + ; fi; done 2>/dev/null | sort -u)
      [ -z "$pids" ] && break
      kill -9 $pids 2>/dev/null || true
      sleep 0.2
    done
    sock="$dir/containerd/containerd.sock"
    for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $sock" || true); do kill -9 "$p" 2>/dev/null || true; done
    # Unmount below <dir>, deepest first.
    awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
    for h in $(hierarchies); do
      [ -d "$h/$CGROOT" ] && find "$h/$CGROOT" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
    ip netns del "$NETNS" 2>/dev/null || true
    rm -f "$OWNER_FILE"
    ;;
  *) echo "usage: $0 up|down <dir>" >&2; exit 2 ;;
esac
