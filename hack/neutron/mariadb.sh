#!/usr/bin/env bash
# A private MariaDB (Debian's mariadb-server) on a unix socket only, for Keystone (hack/neutron/keystone.sh) and for
# neutron-server with NEUTRON_DB=mariadb (hack/neutron/up.sh). See /work/shared/notes/neutron.md.
#
# Usage: hack/neutron/mariadb.sh up <root> <database>   (stdout: the socket path; creates <database> if missing)
#        hack/neutron/mariadb.sh down <root>
#
# State lives in <root>: mysql/ (data dir), mysql.sock, mysql.pid, log/mariadb.log. Root logs in without a password
# over the socket (no TCP at all: --skip-networking).
# Invariants: idempotent (a server answering on <root>/mysql.sock is reused); the daemon inherits no fds but stdio (no
# caller's lock is held by it) and has "<root>/" in its command line; `down` stops exactly the mariadbd processes whose
# command line names <root>/ (SIGTERM, then SIGKILL after 30 s: InnoDB flushes on a clean shutdown).
set -euo pipefail

log() { printf '[mariadb +%ss] %s\n' "$SECONDS" "$*" >&2; }
die() { printf 'mariadb: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/neutron/procs.sh
. "$(dirname "$0")/procs.sh"

down() { stop_naming mariadbd 30 "$1/" mariadbd; }

up() {
  local root=$1 db=$2 sock deadline
  [[ "$db" =~ ^[a-z_]+$ ]] || die "bad database name '$db'"
  [ -x /usr/sbin/mariadbd ] || die "mariadb-server is not installed (apt-get install mariadb-server python3-pymysql)"
  mkdir -p "$root/log"
  sock=$root/mysql.sock
  if ! mariadb-admin --socket="$sock" -uroot ping >/dev/null 2>&1; then
    down "$root"
    if [ ! -d "$root/mysql/mysql" ]; then
      log "initialising MariaDB in $root/mysql"
      mariadb-install-db --user=root --datadir="$root/mysql" --auth-root-authentication-method=normal --skip-test-db \
        >"$root/log/mariadb-install.log" 2>&1 || { tail -n 20 "$root/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    fi
    setsid /usr/sbin/mariadbd --no-defaults --user=root --datadir="$root/mysql" --socket="$sock" --pid-file="$root/mysql.pid" \
      --skip-networking --innodb-buffer-pool-size=64M --log-error="$root/log/mariadb.log" </dev/null >/dev/null 2>&1 7>&- 8>&- 9>&- &
    deadline=$((SECONDS + 60))
    until mariadb-admin --socket="$sock" -uroot ping >/dev/null 2>&1; do
      [ $SECONDS -lt $deadline ] || { tail -n 20 "$root/log/mariadb.log" >&2; die "MariaDB did not start"; }
      sleep 0.2 # readiness polling
    done
  fi
  mariadb --socket="$sock" -uroot -e "CREATE DATABASE IF NOT EXISTS $db" || die "CREATE DATABASE $db failed"
  echo "$sock"
}

case "${1:-}" in
  up) [ -n "${3:-}" ] || die "usage: $0 up <root> <database>"; up "$2" "$3" ;;
  down) [ -n "${2:-}" ] || die "usage: $0 down <root>"; down "$2" ;;
  *) printf 'usage: %s up <root> <database> | down <root>\n' "$0" >&2; exit 2 ;;
esac
