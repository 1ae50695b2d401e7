#!/usr/bin/env bash
# A real OpenStack Keystone (Debian's `keystone` package, under uwsgi) on loopback with its own MariaDB, for
# neutron-server's keystonemiddleware (hack/neutron/up.sh with NEUTRON_AUTH=keystone). See /work/shared/notes/neutron.md.
#
# Usage: hack/neutron/keystone.sh install          (root; apt-get install keystone mariadb-server, once per machine)
#        hack/neutron/keystone.sh up <dir>         (stdout: the Keystone URL, e.g. http://127.0.0.1:PORT/v3)
#        hack/neutron/keystone.sh register <dir> <neutron-url>   (network service + endpoint in the catalog)
#        hack/neutron/keystone.sh down <dir>
#
# State lives in <dir>/keystone: mysql/ (MariaDB data, unix socket only, no TCP: hack/neutron/mariadb.sh; with
# NEUTRON_DB=mariadb neutron-server's database `neutron` lives there too), keystone.conf, fernet and credential
# keys, uwsgi.ini, logs, port. What `up` creates (passwords are fixed test passwords: loopback only; the admin API calls
# are in keystone-admin.py next to this script):
#   domain Default; region RegionOne; roles admin, member, reader (keystone-manage bootstrap)
#   project admin   / user admin   / password admin-pw   (role admin)   — also neutron-server's service user
#   project k8s     / user k8s     / password k8s-pw     (role member)  — the controller's credentials
#   project other   / user other   / password other-pw   (role member)  — a second tenant
# Environment: KEYSTONE_TOKEN_EXPIRATION (seconds, default 3600: [token] expiration); NEUTRON_HOST (the address to
# bind and advertise, default 127.0.0.1; hack/neutron/up.sh).
#
# Invariants: only NEUTRON_HOST (uwsgi; default 127.0.0.1) and a unix socket (MariaDB) are used; daemons inherit no fds but stdio (no
# caller's lock is held by them); every process started here has
# "<dir>/keystone/" in its command line and `down` stops exactly those (SIGTERM, then SIGKILL after 15 s).
set -euo pipefail

cmd=${1:-}
here=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
host=${NEUTRON_HOST:-127.0.0.1}
log() { printf '[keystone +%ss] %s\n' "$SECONDS" "$*" >&2; }
die() { printf 'keystone: error: %s\n' "$*" >&2; exit 1; }

installed() {
  [ -x /usr/bin/keystone-manage ] && [ -x /usr/sbin/mariadbd ] && [ -x /usr/bin/uwsgi_python3 -o -x /usr/bin/uwsgi ] &&
    [ "$(dpkg-query -W -f='${Status}' keystone 2>/dev/null || true)" = "install ok installed" ]
}

install() {
  installed && return 0
  [ "$(id -u)" = 0 ] || die "keystone is not installed and installing it needs root"
  exec 8>/var/lock/ts-controller-manager-keystone-install.lock
  flock -w 900 8 || die "timed out waiting for another keystone install"
  installed && return 0
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi
  local t0=$SECONDS
  log "installing Debian keystone, mariadb-server and uwsgi (first time on this machine)"
  apt-get update -qq -o DPkg::Lock::Timeout=300 >&2 || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 \
    keystone mariadb-server uwsgi-core uwsgi-plugin-python3 python3-pymysql >/tmp/tscm-keystone-apt.log 2>&1 ||
    { tail -n 30 /tmp/tscm-keystone-apt.log >&2; die "apt-get install keystone failed"; }
  installed || die "keystone still not installed after apt-get"
  log "installed keystone $(dpkg-query -W -f='${Version}' keystone) in $((SECONDS - t0))s"
}

free_port() { "$PY" -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1]); s.close()' "$host"; }

# shellcheck source=hack/neutron/procs.sh
. "$here/procs.sh"

down() { stop_naming "keystone/mariadb processes" 15 "$1/keystone/" '(mariadbd|uwsgi)'; }

up() {
  local dir=$1
  k=$dir/keystone
  mkdir -p "$k/log" "$k/fernet-keys" "$k/credential-keys"
  chmod 700 "$k/fernet-keys" "$k/credential-keys"
  local kport
  if [ -f "$k/url" ] && [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$(cat "$k/url")" || true)" = 200 ]; then
    cat "$k/url"; return 0
  fi
  down "$dir"

  # --- MariaDB (unix socket only; hack/neutron/mariadb.sh) ---
  bash "$here/mariadb.sh" up "$k" keystone >/dev/null 7>&- 8>&- 9>&- || die "starting MariaDB failed (log: $k/log/mariadb.log)"

  # --- keystone.conf ---
  kport=$(cat "$k/port" 2>/dev/null || free_port)
  echo "$kport" > "$k/port"
  local url="http://$host:$kport/v3"
  cat > "$k/keystone.conf" <<EOF
# Written by hack/neutron/keystone.sh
[DEFAULT]
log_dir = $k/log
log_file = keystone.log
[database]
connection = mysql+pymysql://root@localhost/keystone?unix_socket=$k/mysql.sock
[token]
provider = fernet
expiration = ${KEYSTONE_TOKEN_EXPIRATION:-3600}
[fernet_tokens]
key_repository = $k/fernet-keys
[fernet_receipts]
key_repository = $k/fernet-keys
[credential]
key_repository = $k/credential-keys
[cache]
enabled = false
EOF
  local ks=(keystone-manage --config-file "$k/keystone.conf")
  if [ ! -f "$k/bootstrapped" ]; then
    log "keystone-manage db_sync (real migrations on MariaDB)"
    "${ks[@]}" db_sync >"$k/log/db_sync.log" 2>&1 || { tail -n 20 "$k/log/db_sync.log" >&2; die "keystone-manage db_sync failed"; }
    "${ks[@]}" fernet_setup --keystone-user root --keystone-group root >>"$k/log/db_sync.log" 2>&1
    "${ks[@]}" credential_setup --keystone-user root --keystone-group root >>"$k/log/db_sync.log" 2>&1
    "${ks[@]}" bootstrap --bootstrap-password admin-pw --bootstrap-admin-url "$url" --bootstrap-internal-url "$url" \
      --bootstrap-public-url "$url" --bootstrap-region-id RegionOne >>"$k/log/db_sync.log" 2>&1 ||
      { tail -n 20 "$k/log/db_sync.log" >&2; die "keystone-manage bootstrap failed"; }
  fi

  # --- uwsgi ---
  cat > "$k/uwsgi.ini" <<EOF
[uwsgi]
http-socket = $host:$kport
wsgi-file = /usr/bin/keystone-wsgi-public
plugins = python3
master = true
# Single-threaded workers: Keystone's dependencies import eventlet, and eventlet with uwsgi threads fails at random
# ("greenlet.error: cannot switch to a different thread", then a hung request). The app is loaded once in the master
# before the workers fork (no lazy-apps: under load a lazily loading worker's first request took longer than a short
# test token lives).
processes = 4
threads = 1
buffer-size = 65535
add-header = Connection: close
die-on-term = true
env = OS_KEYSTONE_CONFIG_FILES=$k/keystone.conf
logto = $k/log/uwsgi.log
EOF
  setsid uwsgi --ini "$k/uwsgi.ini" </dev/null >/dev/null 2>&1 7>&- 8>&- 9>&- &
  local deadline=$((SECONDS + 60))
  until [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" || true)" = 200 ]; do
    [ $SECONDS -lt $deadline ] || { tail -n 30 "$k/log/uwsgi.log" >&2; die "keystone did not answer $url"; }
    sleep 0.2 # readiness polling
  done

  if [ ! -f "$k/bootstrapped" ]; then
    log "creating projects k8s and other with their users"
    "$PY" "$here/keystone-admin.py" projects "$url" || die "creating projects/users failed"
    touch "$k/bootstrapped"
  fi
  echo "$url" > "$k/url"
  echo "$url"
}

# register <dir> <neutron-url>: the network service and its public/internal/admin endpoints (replacing old ones).
register() {
  local dir=$1 nurl=$2
  "$PY" "$here/keystone-admin.py" register "$(cat "$dir/keystone/url")" "$nurl" || die "registering the network endpoint failed"
}

case "$cmd" in
  install) install ;;
  up) [ -n "${2:-}" ] || die "usage: $0 up <dir>"; install; up "$2" ;;
  register) [ -n "${3:-}" ] || die "usage: $0 register <dir> <neutron-url>"; register "$2" "$3" ;;
  down) [ -n "${2:-}" ] || die "usage: $0 down <dir>"; down "$2" ;;
  *) printf 'usage: %s install | up <dir> | register <dir> <neutron-url> | down <dir>\n' "$0" >&2; exit 2 ;;
esac
