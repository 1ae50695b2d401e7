#!/usr/bin/env bash
# Stops the neutron-server started by hack/neutron/up.sh (and the Keystone and MariaDB it started) and removes its
# state dir.
#
# Usage: hack/neutron/down.sh [--keep-state]     (or: make neutron-down)
#   --keep-state   stop the processes but keep the state dir (config, db, logs)
#   --no-lock      internal: the caller (up.sh) already holds the state dir's lock
# Environment: NEUTRON_DIR (default <repo>/.neutron), NEUTRON_STOP_TIMEOUT (seconds before SIGKILL, default 15).
#
# Invariants:
#   - Only processes of THIS state dir are signalled: the recorded parent's process group, recorded worker pids,
#     the parent's children, and any process whose command line names this dir's neutron.conf — each pid is checked
#     against that command line first, so a reused pid is never killed.
#   - Returns only when none of them is left (SIGTERM, then SIGKILL after NEUTRON_STOP_TIMEOUT); exits non-zero if
#     a process survives SIGKILL.
#   - Safe to run when nothing is running or the dir does not exist.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=${NEUTRON_DIR:-$repo/.neutron}
keep=false lock=true
for arg in "$@"; do
  case "$arg" in
    --keep-state) keep=true ;;
    --no-lock) lock=false ;;
    *) printf 'usage: %s [--keep-state]\n' "$0" >&2; exit 2 ;;
  esac
done
stop_timeout=${NEUTRON_STOP_TIMEOUT:-15}

log() { printf '[neutron-down] %s\n' "$*" >&2; }

if [ -d "$dir" ]; then
  dir=$(cd "$dir" && pwd -P)
else
  # No state dir (removed by hand?): still look for processes started with it, below.
  dir=$(realpath -m "$dir")
  lock=false keep=true
fi
if $lock; then
  exec 9>"$dir/.lock"
  flock -w 120 9 || { log "another up.sh/down.sh holds $dir/.lock"; exit 1; }
fi

marker="--config-file $dir/neutron.conf"

# ours <pid>: the pid is alive (not a zombie) and its command line names this state dir's neutron.conf.
ours() {
  local pid=$1
  [[ "$pid" =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/cmdline" ] || return 1
  [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" != Z ] || return 1
  local cmd
  cmd=$( { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null) || return 1
  [[ "$cmd" == *"$marker"* ]]
}

# candidates: every pid that may belong to this server (deduplicated, unchecked).
candidates() {
  local parent=""
  [ -f "$dir/neutron.pid" ] && parent=$(cat "$dir/neutron.pid")
  {
    [ -n "$parent" ] && echo "$parent"
    [ -n "$parent" ] && pgrep -g "$parent" 2>/dev/null
    [ -n "$parent" ] && pgrep -P "$parent" 2>/dev/null
    [ -f "$dir/workers.pid" ] && cat "$dir/workers.pid"
    # Orphaned workers whose parent died (their pgid is still the parent's, but be thorough).
    grep -lsF -- "$dir/neutron.conf" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3
  } | sort -un
}

living() {
  local pid out=()
  for pid in $(candidates); do ours "$pid" && out+=("$pid"); done
  echo "${out[@]:-}"
}

pids=$(living)
if [ -n "$pids" ]; then
  log "stopping neutron-server processes: $pids"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  deadline=$((SECONDS + stop_timeout))
  while pids=$(living) && [ -n "$pids" ]; do
    if [ $SECONDS -ge $deadline ]; then
      log "still running after ${stop_timeout}s, sending SIGKILL: $pids"
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      kdeadline=$((SECONDS + 10))
      while pids=$(living) && [ -n "$pids" ]; do
        [ $SECONDS -lt $kdeadline ] || { log "error: processes survived SIGKILL: $pids"; exit 1; }
        sleep 0.1 # polling for process exit
      done
      break
    fi
    sleep 0.1 # polling for process exit
  done
  log "stopped"
else
  log "no neutron-server running for $dir"
fi
rm -f "$dir/neutron.pid" "$dir/workers.pid" 2>/dev/null || true
# NEUTRON_AUTH=keystone: Keystone (uwsgi) and its MariaDB, found by the state dir in their command lines.
if [ -d "$dir/keystone" ]; then bash "$repo/hack/neutron/keystone.sh" down "$dir"; fi
# NEUTRON_DB=mariadb without Keystone: its private MariaDB, found by <dir>/mariadb/ in its command line (with Keystone
# the neutron database lives in Keystone's MariaDB, stopped just above).
bash "$repo/hack/neutron/mariadb.sh" down "$dir/mariadb"

if [ -d "$dir" ] && ! $keep; then
  rm -rf "$dir"
  log "removed $dir"
fi
