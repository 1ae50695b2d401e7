#!/usr/bin/env bash
# Starts a real OpenStack Neutron API server (Debian's neutron-server) on loopback, for development and tests.
# See /work/shared/notes/neutron.md for why the configuration looks like this (noauth, SQLite, no agents/broker).
# NEUTRON_DB=mariadb gives it the database real clouds run it on (MySQL/MariaDB) instead of the fast default, SQLite.
#
# Usage: hack/neutron/up.sh                 (or: make neutron-up)
#   stdout: exactly one line, `export NEUTRON_CLOUD_CONFIG=<state dir>/clouds.yaml` (eval-able)
#   stderr: progress
#        hack/neutron/up.sh --install-only  (CI: install the Debian package and cache the db schema; start nothing)
#
# Environment:
#   NEUTRON_DIR            state dir (config, SQLite db, logs, pids, clouds.yaml). Default: <repo>/.neutron
#   NEUTRON_DB             sqlite (default: fast to set up, a cached empty schema is copied; but one writer at a time,
#                          so concurrent writes get 500/409 "database is locked") or mariadb: a private MariaDB
#                          (Debian's mariadb-server, unix socket only; hack/neutron/mariadb.sh) with a database
#                          `neutron` built by the real migrations (`neutron-db-manage upgrade heads`, ~5-10 s on a new
#                          db). With NEUTRON_AUTH=keystone it is Keystone's MariaDB (<dir>/keystone/mysql), else its
#                          own (<dir>/mariadb/mysql). What real clouds run Neutron on; use it for load (bench/).
#   NEUTRON_API_WORKERS    neutron-server's api_workers. Default 0: the API runs in the parent process (with sqlite more
#                          processes only fight over SQLite's lock; with mariadb 2 workers showed no gain over 0 on
#                          this shared 2-core machine — bench/README.md, "Neutron on SQLite vs MariaDB")
#   NEUTRON_PORT           port to bind. Default: the previous run's port if still free, else a free one
#   NEUTRON_HOST           the address neutron-server (and with NEUTRON_AUTH=keystone, Keystone) binds and advertises
#                          in clouds.yaml and the Keystone catalog. Default 127.0.0.1. A local address of this machine
#                          only, e.g. the real node's veth end (test/cluster/node.ts HOST_IP) so Pods reach it.
#   NEUTRON_AUTH           noauth (default): every request is admin in project fake_project_id.
#                          keystonecontext: per-project isolation without Keystone; identity comes from the
#                          X-User-Id / X-Project-Id / X-Roles headers (no headers -> 401).
#                          keystone: a REAL Keystone (Debian's keystone under uwsgi on loopback, its own MariaDB; see
#                          hack/neutron/keystone.sh) with projects k8s and other; neutron-server validates tokens with
#                          keystonemiddleware (auth_strategy = keystone); clouds.yaml gets auth_type password clouds
#                          `local` (user k8s in project k8s), `other` (user other, project other) and `admin`.
#                          First use installs keystone + mariadb-server; setting up costs about a minute.
#   KEYSTONE_TOKEN_EXPIRATION  with NEUTRON_AUTH=keystone: token lifetime in seconds (default 3600)
#   NEUTRON_TOKEN_CACHE_TIME   with NEUTRON_AUTH=keystone: keystonemiddleware's token_cache_time in seconds (default -1:
#                          every request is validated by Keystone, so a revoked token fails at once); 300 is
#                          keystonemiddleware's own default and what clouds run (with memcached; here in-process
#                          per neutron-server worker) — Keystone then sees one validation per token and worker
#   NEUTRON_OVERLAPPING_IPS  true (default here) or false (Neutron's own default, and most clouds'): with false, no two
#                          subnets in the whole server may overlap (allow_overlapping_ips)
#   NEUTRON_PAGE_LIMIT     a number: pagination_max_limit, the server's cap on page size (Neutron's default: none);
#                          lists then come in pages of at most that many items with `next` links
#   NEUTRON_START_TIMEOUT  seconds to wait for `GET /` to answer 200. Default: 60
#   TSCM_CACHE_DIR         cache outside the clone (default ${XDG_CACHE_HOME:-~/.cache}/ts-controller-manager):
#                          holds an empty, stamped neutron.db per neutron-server version
#
# Invariants:
#   - Idempotent: if the server recorded in the state dir is alive and answers, only the export line is printed.
#   - Data survives restarts: an existing neutron.db (or MariaDB database) is reused (schema only created for a new db).
#   - neutron-server runs in its own session/process group (pgid == recorded pid); hack/neutron/down.sh stops the
#     whole group plus any recorded worker pid, so nothing is left running.
#   - Only NEUTRON_HOST (default 127.0.0.1) is bound. Package scripts never start services (policy-rc.d exits 101).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
install_only=false
for arg in "$@"; do
  case "$arg" in
    --install-only) install_only=true ;;
    *) printf 'usage: %s [--install-only]\n' "$0" >&2; exit 2 ;;
  esac
done
if $install_only; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/tscm-neutron-install.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
else
  dir=${NEUTRON_DIR:-$repo/.neutron}
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd -P)
auth_mode=${NEUTRON_AUTH:-noauth}
host=${NEUTRON_HOST:-127.0.0.1}
export NEUTRON_HOST=$host # keystone.sh binds and advertises the same address
start_timeout=${NEUTRON_START_TIMEOUT:-60}
PY=/usr/bin/python3 # Debian's python: a python3 earlier on PATH (pyenv) lacks Debian's dist-packages.

t0=$SECONDS
log() { printf '[neutron-up +%ss] %s\n' "$((SECONDS - t0))" "$*" >&2; }
die() { printf 'neutron-up: error: %s\n' "$*" >&2; exit 1; }

[[ "$host" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "NEUTRON_HOST must be an IPv4 address of this machine, not '$host'"
case "$auth_mode" in noauth|keystonecontext|keystone) ;; *) die "NEUTRON_AUTH must be noauth, keystonecontext or keystone, not '$auth_mode'";; esac
overlapping_ips=${NEUTRON_OVERLAPPING_IPS:-true}
case "$overlapping_ips" in true|false) ;; *) die "NEUTRON_OVERLAPPING_IPS must be true or false, not '$overlapping_ips'";; esac
page_limit=${NEUTRON_PAGE_LIMIT:--1}
[[ "$page_limit" =~ ^(-1|[1-9][0-9]*)$ ]] || die "NEUTRON_PAGE_LIMIT must be a positive number, not '$page_limit'"
db=${NEUTRON_DB:-sqlite}
case "$db" in sqlite|mariadb) ;; *) die "NEUTRON_DB must be sqlite or mariadb, not '$db'";; esac
api_workers=${NEUTRON_API_WORKERS:-0}
[[ "$api_workers" =~ ^[0-9]+$ ]] || die "NEUTRON_API_WORKERS must be a number, not '$api_workers'"
# MariaDB for neutron-server: Keystone's (keystone.sh starts it) or a private one in the state dir.
if [ "$auth_mode" = keystone ]; then dbroot=$dir/keystone; else dbroot=$dir/mariadb; fi
settings="auth=$auth_mode overlapping_ips=$overlapping_ips page_limit=$page_limit db=$db api_workers=$api_workers"

export_line() { printf 'export NEUTRON_CLOUD_CONFIG=%s\n' "$dir/clouds.yaml"; }

# alive <pid>: the pid is a running neutron-server started with this state dir's config (guards against pid reuse).
alive() {
  local pid=$1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  local cmd
  cmd=$( { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null) || return 1
  [[ "$cmd" == *"--config-file $dir/neutron.conf"* ]] || return 1
  # A zombie has an empty cmdline, so it never gets here.
}

# answers <port>: GET http://$host:<port>/ returns 200 within 2 s.
answers() { [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://$host:$1/" 2>/dev/null || true)" = 200 ]; }

# One up.sh at a time per state dir (down.sh takes the same lock).
exec 9>"$dir/.lock"
flock -w 300 9 || die "another up.sh/down.sh holds $dir/.lock"

# --- already running? ---------------------------------------------------------------------------------------------
if [ -f "$dir/neutron.pid" ] && [ -f "$dir/port" ]; then
  pid=$(cat "$dir/neutron.pid"); port=$(cat "$dir/port")
  if alive "$pid" && answers "$port" && [ -f "$dir/clouds.yaml" ]; then
    running=$(cat "$dir/settings" 2>/dev/null || echo "auth=$(cat "$dir/auth_mode" 2>/dev/null || echo noauth) overlapping_ips=true page_limit=-1")
    [[ "$running" == *" db="* ]] || running="$running db=sqlite api_workers=0" # written before NEUTRON_DB existed
    [ "$running" = "$settings" ] ||
      die "the running neutron-server (pid $pid) has settings '$running', not '$settings': run hack/neutron/down.sh first"
    log "neutron-server already running (pid $pid, http://$host:$port)"
    export_line
    exit 0
  fi
  if alive "$pid"; then
    die "neutron-server pid $pid is running but http://$host:$port/ does not answer: run hack/neutron/down.sh first (log: $dir/log/neutron-server.log)"
  fi
  log "stale pid file (pid $pid not running): starting a new server"
fi

# --- install (once per machine) -----------------------------------------------------------------------------------
installed() {
  [ -x /usr/bin/neutron-server ] && [ -x /usr/bin/neutron-db-manage ] &&
    [ "$(dpkg-query -W -f='${Status}' neutron-server 2>/dev/null || true)" = "install ok installed" ]
}
if ! installed; then
  [ "$(id -u)" = 0 ] || die "neutron-server is not installed and installing it needs root (apt-get install neutron-server)"
  exec 8>/var/lock/ts-controller-manager-neutron-install.lock
  flock -w 900 8 || die "timed out waiting for another neutron-server install"
  if ! installed; then
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      log "writing /usr/sbin/policy-rc.d (exit 101: package scripts must not start services)"
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
      chmod +x /usr/sbin/policy-rc.d
    fi
    ti=$SECONDS
    log "installing Debian neutron-server (first time on this machine: ~200 packages, about a minute)"
    log "apt-get update"
    apt-get update -qq -o DPkg::Lock::Timeout=300 >&2 || die "apt-get update failed"
    log "apt-get install neutron-server"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
      neutron-server >"$dir/apt.log" 2>&1 || { tail -n 30 "$dir/apt.log" >&2; die "apt-get install neutron-server failed (full log: $dir/apt.log)"; }
    installed || die "apt-get install finished but neutron-server is not installed (log: $dir/apt.log)"
    log "installed neutron-server $(dpkg-query -W -f='${Version}' neutron-server) in $((SECONDS - ti))s"
  fi
  exec 8>&-
fi
if [ "$db" = mariadb ] && ! { [ -x /usr/sbin/mariadbd ] && "$PY" -c 'import pymysql' 2>/dev/null; }; then
  [ "$(id -u)" = 0 ] || die "NEUTRON_DB=mariadb needs mariadb-server and python3-pymysql, and installing them needs root"
  exec 8>/var/lock/ts-controller-manager-neutron-install.lock
  flock -w 900 8 || die "timed out waiting for another neutron-server install"
  log "apt-get install mariadb-server python3-pymysql"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 \
    mariadb-server python3-pymysql >"$dir/apt-mariadb.log" 2>&1 ||
    { tail -n 30 "$dir/apt-mariadb.log" >&2; die "apt-get install mariadb-server failed (full log: $dir/apt-mariadb.log)"; }
  exec 8>&-
fi

# --- configuration ------------------------------------------------------------------------------------------------
mkdir -p "$dir/state" "$dir/log" "$dir/lock"
if [ "$overlapping_ips" = false ] && ! grep -rqs --include='*.py' allow_overlapping_ips /usr/lib/python3/dist-packages/neutron/conf/; then
  # neutron-server 21 (Zed, Debian bookworm) no longer has the option: subnets may overlap across networks, never on
  # one network. The setting is still written (older servers honour it) but has no effect here.
  log "note: this neutron-server has no allow_overlapping_ips option (overlaps are refused only within one network); NEUTRON_OVERLAPPING_IPS=false has no effect"
fi

port_free() { "$PY" -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[2], int(sys.argv[1]))); s.close()' "$1" "$host" 2>/dev/null; }
if [ -n "${NEUTRON_PORT:-}" ]; then
  port=$NEUTRON_PORT
  port_free "$port" || die "NEUTRON_PORT=$port is in use on $host"
elif [ -f "$dir/port" ] && port_free "$(cat "$dir/port")"; then
  port=$(cat "$dir/port")
else
  port=$("$PY" -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1]); s.close()' "$host")
fi

paste=/etc/neutron/api-paste.ini
if [ "$auth_mode" = keystonecontext ]; then
  # The noauth pipeline becomes upstream's keystone pipeline minus authtoken: keystonecontext builds the request
  # context from X-User-Id / X-Project-Id / X-Roles (what keystonemiddleware sets after validating a token), and
  # fake_project_id (which would make header-less requests admin) is gone.
  paste=$dir/api-paste.ini
  "$PY" - /etc/neutron/api-paste.ini "$paste" <<'EOF'
import re, sys
src, dst = sys.argv[1], sys.argv[2]
text = open(src).read()
sec = re.search(r'(?ms)^\[composite:neutronapi_v2_0\]\n(.*?)(?=^\[|\Z)', text)
ks = sec and re.search(r'(?m)^keystone\s*=\s*(.*)$', sec.group(1))
if not ks or ' authtoken ' not in ks.group(1):
    sys.exit('could not find the keystone pipeline of [composite:neutronapi_v2_0] in ' + src)
body = re.sub(r'(?m)^noauth\s*=.*$', 'noauth = ' + ks.group(1).replace(' authtoken ', ' '), sec.group(1), count=1)
open(dst, 'w').write(text[:sec.start(1)] + body + text[sec.end(1):])
EOF
fi

strategy=noauth
if [ "$auth_mode" = keystone ]; then
  # 9>&-: Keystone's and MariaDB's daemons must not inherit (and so hold forever) this state dir's lock.
  keystone_url=$(bash "$repo/hack/neutron/keystone.sh" up "$dir" 9>&-) || die "starting Keystone failed (logs: $dir/keystone/log)"
  strategy=keystone
  log "keystone at $keystone_url"
fi
if [ "$db" = mariadb ] && ! $install_only; then
  # 9>&-: as above. With keystone this is Keystone's running MariaDB (the call only creates the database).
  sock=$(bash "$repo/hack/neutron/mariadb.sh" up "$dbroot" neutron 9>&-) || die "starting MariaDB failed (log: $dbroot/log/mariadb.log)"
  connection="mysql+pymysql://root@localhost/neutron?unix_socket=$sock"
else
  connection="sqlite:///$dir/neutron.db"
fi

cat > "$dir/neutron.conf" <<EOF
# Written by hack/neutron/up.sh: a single neutron-server with no message broker and no agents ($settings).
[DEFAULT]
bind_host = $host
bind_port = $port
auth_strategy = $strategy
core_plugin = ml2
service_plugins =
api_workers = $api_workers
rpc_workers = 0
rpc_state_report_workers = 0
transport_url = fake:/
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
dhcp_agent_notification = false
allow_overlapping_ips = $overlapping_ips
pagination_max_limit = $page_limit
state_path = $dir/state
api_paste_config = $paste
log_dir = $dir/log
log_file = neutron-server.log
debug = false

[database]
connection = $connection

[oslo_concurrency]
lock_path = $dir/lock

[oslo_messaging_notifications]
driver = noop

[agent]
root_helper =
EOF
if [ "$auth_mode" = keystone ]; then
  # By default keystonemiddleware validates every token with Keystone (no validation cache: a revoked token fails at
  # once); NEUTRON_TOKEN_CACHE_TIME sets the cache as clouds run it.
  cat >> "$dir/neutron.conf" <<EOF

[keystone_authtoken]
www_authenticate_uri = $keystone_url
auth_url = $keystone_url
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = admin
username = admin
password = admin-pw
region_name = RegionOne
token_cache_time = ${NEUTRON_TOKEN_CACHE_TIME:--1}
EOF
fi

# vni_ranges: every tenant network takes one VXLAN id; 1:1000 (devstack's) ran out at 1 000 networks, answering 503
# NoNetworkAvailable (the 1 000-Network benchmark's raw reference holds 2 000 at once).
cat > "$dir/ml2_conf.ini" <<'EOF'
[ml2]
type_drivers = flat,vlan,vxlan
tenant_network_types = vxlan
mechanism_drivers =
extension_drivers = port_security

[ml2_type_flat]
flat_networks = *

[ml2_type_vlan]
network_vlan_ranges = physnet1:100:199

[ml2_type_vxlan]
vni_ranges = 1:4096

[securitygroup]
enable_security_group = true
EOF

# --- database -----------------------------------------------------------------------------------------------------
# `neutron-db-manage upgrade heads` cannot run on SQLite (ALTER of constraints): build the schema from the models and
# stamp the migration heads instead (5-30 s of Python imports). The empty, stamped db is cached per neutron-server
# version outside the clone (like hack/build-tools.sh's binaries) and copied, so later starts skip that work.
# An existing db in the state dir is kept (data survives restarts).
# NEUTRON_DB=mariadb: the real migrations, once per database (the marker lives next to MariaDB's data).
if [ "$db" = mariadb ] && ! $install_only; then
  if [ ! -f "$dbroot/neutron-db.migrated" ]; then
    td=$SECONDS
    log "neutron-db-manage upgrade heads (real migrations on MariaDB)"
    neutron-db-manage --config-file "$dir/neutron.conf" --config-file "$dir/ml2_conf.ini" upgrade heads >"$dir/log/db.log" 2>&1 ||
      { tail -n 30 "$dir/log/db.log" >&2; die "neutron-db-manage upgrade heads failed (log: $dir/log/db.log)"; }
    touch "$dbroot/neutron-db.migrated"
    log "database ready in $((SECONDS - td))s"
  fi
elif [ ! -s "$dir/neutron.db" ] || [ ! -f "$dir/db.stamped" ]; then
  td=$SECONDS
  rm -f "$dir/neutron.db" "$dir/db.stamped"
  cache=${TSCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ts-controller-manager}/neutron/$(dpkg-query -W -f='${Version}' neutron-server | tr -c 'A-Za-z0-9.+~-' '_')
  mkdir -p "$cache"
  exec 7>"$cache/.lock"
  flock -w 300 7 || die "timed out waiting for $cache/.lock"
  if [ ! -s "$cache/neutron.db" ]; then
    log "creating the SQLite schema from neutron's models (cached in $cache)"
    rm -f "$cache/neutron.db.tmp"
    "$PY" -c 'import sys, sqlalchemy as sa
from neutron.db.migration.models import head
head.get_metadata().create_all(sa.create_engine(sys.argv[1]))' "sqlite:///$cache/neutron.db.tmp" >"$dir/log/db.log" 2>&1 ||
      { tail -n 30 "$dir/log/db.log" >&2; die "creating the schema failed (log: $dir/log/db.log)"; }
    # stamp writes the alembic heads into the db named by the config: point a scratch config at the template.
    sed "s|^connection = .*|connection = sqlite:///$cache/neutron.db.tmp|" "$dir/neutron.conf" > "$dir/stamp.conf"
    neutron-db-manage --config-file "$dir/stamp.conf" --config-file "$dir/ml2_conf.ini" stamp heads >>"$dir/log/db.log" 2>&1 ||
      { tail -n 30 "$dir/log/db.log" >&2; die "neutron-db-manage stamp heads failed (log: $dir/log/db.log)"; }
    rm -f "$dir/stamp.conf"
    mv "$cache/neutron.db.tmp" "$cache/neutron.db"
  fi
  cp "$cache/neutron.db" "$dir/neutron.db.tmp"
  mv "$dir/neutron.db.tmp" "$dir/neutron.db"
  exec 7>&-
  touch "$dir/db.stamped"
  log "database ready in $((SECONDS - td))s"
fi

if $install_only; then
  log "neutron-server $(dpkg-query -W -f='${Version}' neutron-server) installed; db schema cached (nothing started)"
  exit 0
fi

# --- start --------------------------------------------------------------------------------------------------------
log "starting neutron-server on http://$host:$port ($settings; logs: $dir/log)"
rm -f "$dir/neutron.pid" "$dir/workers.pid"
ts=$SECONDS
# setsid: a new session and process group whose id is the server's pid (a background job of a non-interactive shell
# is never a group leader, so setsid execs in place and $! is the server). No inherited stdio/lock fds: callers that
# read our stdout (e.g. the test helper) must see EOF when this script exits.
setsid /usr/bin/neutron-server --config-file "$dir/neutron.conf" --config-file "$dir/ml2_conf.ini" \
  </dev/null >>"$dir/log/stdout.log" 2>&1 9>&- &
pid=$!
echo "$pid" > "$dir/neutron.pid"
echo "$port" > "$dir/port"

fail_start() {
  printf -- '--- last lines of %s ---\n' "$dir/log/neutron-server.log" >&2
  tail -n 40 "$dir/log/neutron-server.log" >&2 2>/dev/null || true
  printf -- '--- last lines of %s ---\n' "$dir/log/stdout.log" >&2
  tail -n 20 "$dir/log/stdout.log" >&2 2>/dev/null || true
  "$repo/hack/neutron/down.sh" --keep-state --no-lock >&2 || true
  die "$1"
}

deadline=$((SECONDS + start_timeout))
until answers "$port"; do
  if ! kill -0 "$pid" 2>/dev/null || [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" = Z ]; then
    wait "$pid" 2>/dev/null && rc=0 || rc=$?
    fail_start "neutron-server exited (status $rc) before answering on http://$host:$port/"
  fi
  [ $SECONDS -lt $deadline ] || fail_start "neutron-server did not answer GET http://$host:$port/ with 200 within ${start_timeout}s"
  sleep 0.2 # polling interval of a readiness probe, not synchronisation
done
pgrep -P "$pid" > "$dir/workers.pid" || true
log "neutron-server ready in $((SECONDS - ts))s (pid $pid, workers: $(tr '\n' ' ' < "$dir/workers.pid"))"

if [ "$auth_mode" = keystone ]; then
  bash "$repo/hack/neutron/keystone.sh" register "$dir" "http://$host:$port" 9>&- || fail_start "registering the network endpoint in Keystone failed"
fi

# --- clouds.yaml --------------------------------------------------------------------------------------------------
# Standard OpenStack clouds.yaml. auth_type none + auth.endpoint is keystoneauth's "none" plugin form; our client also
# accepts endpoint_override / network_endpoint_override (openstacksdk's per-service override).
if [ "$auth_mode" = keystone ]; then
  cloud() { # name user password
    printf '  %s:\n    auth_type: password\n    auth:\n      auth_url: %s\n      username: %s\n      password: %s\n      project_name: %s\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n    interface: public\n' \
      "$1" "$keystone_url" "$2" "$3" "$2"
  }
  { echo "# Written by hack/neutron/up.sh: the local neutron-server behind a real Keystone ($keystone_url)."
    echo "clouds:"; cloud local k8s k8s-pw; cloud other other other-pw; cloud admin admin admin-pw; } > "$dir/clouds.yaml.tmp"
else
cat > "$dir/clouds.yaml.tmp" <<EOF
# Written by hack/neutron/up.sh: the local neutron-server (no Keystone; auth: $auth_mode).
clouds:
  local:
    auth_type: none
    auth:
      endpoint: http://$host:$port
    region_name: RegionOne
    network_api_version: "2"
EOF
fi
mv "$dir/clouds.yaml.tmp" "$dir/clouds.yaml"
echo "$auth_mode" > "$dir/auth_mode"
echo "$settings" > "$dir/settings"

log "up in $((SECONDS - t0))s"
export_line
