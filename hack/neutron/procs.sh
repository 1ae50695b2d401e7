# Sourced by hack/neutron/keystone.sh and hack/neutron/mariadb.sh: finding and stopping the processes a script started,
# by a path their command lines name (each script gives its daemons a private path on their command line).

# pids_naming <path> <ERE>: live (not zombie) pids whose command line names <path> and matches <ERE> — never this
# shell or its callers (whose command lines name the path too, as an argument, but do not match the daemon's name).
pids_naming() {
  local path=$1 ere=$2 pid
  for pid in $(grep -lsF -- "$path" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 | sort -un); do
    [ "$pid" = $$ ] && continue
    [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" != Z ] || continue
    { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -qE -- "$ere" || continue
    echo "$pid"
  done
}

# stop_naming <what> <grace-seconds> <path> <ERE>: SIGTERM every pid `pids_naming <path> <ERE>` lists, SIGKILL those
# still there after <grace-seconds>; returns once none is left. Logs through the caller's `log`.
stop_naming() {
  local what=$1 grace=$2 path=$3 ere=$4 pids deadline
  pids=$(pids_naming "$path" "$ere" | tr '\n' ' ')
  [ -n "${pids// /}" ] || return 0
  log "stopping $what: $pids"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  deadline=$((SECONDS + grace))
  while pids=$(pids_naming "$path" "$ere" | tr '\n' ' ') && [ -n "${pids// /}" ]; do
    if [ $SECONDS -ge $deadline ]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
    fi
    sleep 0.1 # polling for process exit
  done
}
