#!/usr/bin/env bash
# Makes sure PostgreSQL, Redis and NATS (with JetStream) answer on their
# default local ports: starts the locally installed servers when they are
# stopped, installs them from Debian's packages when they are missing (and we
# are root), and says plainly what is missing otherwise. Used by `make run`,
# `make test` and .ci/run. Servers reached through DATABASE_URL, REDIS_URL or
# NATS_URL on another host are only checked, never started.
set -euo pipefail

log() { printf 'deps: %s\n' "$*" >&2; }

reachable() { # host port
  timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

wait_for() { # name host port
  for _ in $(seq 1 60); do
    reachable "$2" "$3" && return 0
    sleep 0.5
  done
  log "$1 did not come up on $2:$3"
  return 1
}

host_port() { # url default_port -> "host port"
  local rest=${1#*://}
  rest=${rest#*@}
  rest=${rest%%/*}
  rest=${rest%%\?*}
  local host=${rest%:*} port=${rest##*:}
  [ "$host" = "$rest" ] && port=$2
  [ -z "$host" ] && host=127.0.0.1
  echo "$host $port"
}

is_local() { [ "$1" = 127.0.0.1 ] || [ "$1" = localhost ] || [ "$1" = "::1" ]; }

apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "$1 is not installed; install it (Debian: apt-get install $*) or point the URL at a running server"
    return 1
  fi
  log "installing $* from Debian's packages"
  local out
  out=$(mktemp)
  # apt's own words are kept and shown when it fails, so a failed install
  # says why instead of vanishing into a quiet run.
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >"$out" 2>&1; then
    log "FAILED to install $* from Debian's packages; apt said:"
    tail -n 15 "$out" | sed 's/^/deps:   /' >&2
    rm -f "$out"
    return 1
  fi
  rm -f "$out"
}

ensure_postgres() {
  read -r host port < <(host_port "${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/parley}" 5432)
  reachable "$host" "$port" && return 0
  is_local "$host" || { log "PostgreSQL at $host:$port does not answer"; return 1; }
  command -v pg_ctlcluster >/dev/null || apt_install postgresql
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
  [ -n "$version" ] || { log "no PostgreSQL cluster found under /etc/postgresql"; return 1; }
  log "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for PostgreSQL "$host" "$port"
}

ensure_redis() {
  read -r host port < <(host_port "${REDIS_URL:-redis://127.0.0.1:6379/0}" 6379)
  reachable "$host" "$port" && return 0
  is_local "$host" || { log "Redis at $host:$port does not answer"; return 1; }
  command -v redis-server >/dev/null || apt_install redis-server
  log "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$port" --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis "$host" "$port"
}

ensure_nats() {
  # NATS_URL may list a cluster's servers, comma-separated: one that
  # answers will do, as it does for the services. Only a single local
  # server is started.
  local urls url host port
  IFS=, read -ra urls <<<"${NATS_URL:-nats://127.0.0.1:4222}"
  for url in "${urls[@]}"; do
    read -r host port < <(host_port "${url// /}" 4222)
    reachable "$host" "$port" && return 0
  done
  [ "${#urls[@]}" -eq 1 ] || { log "none of the NATS servers of NATS_URL answers"; return 1; }
  is_local "$host" || { log "NATS at $host:$port does not answer"; return 1; }
  command -v nats-server >/dev/null || apt_install nats-server
  log "starting NATS with JetStream"
  mkdir -p /var/lib/nats-server 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec "$(command -v nats-server)" -- \
    -a 127.0.0.1 -p "$port" -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for NATS "$host" "$port"
}

ensure_database() {
  # The services create their own schemas; the database itself must exist.
  local url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/parley?sslmode=disable}
  local name=${url##*/}
  name=${name%%\?*}
  command -v psql >/dev/null || return 0
  local admin=${url%/*}/postgres
  if ! psql "$admin" -tAc "SELECT 1 FROM pg_database WHERE datname = '$name'" | grep -q 1; then
    log "creating database $name"
    psql "$admin" -qc "CREATE DATABASE \"$name\"" >/dev/null
  fi
}

ensure_chromium() {
  # The webchat end-to-end test drives the widget in headless Chromium
  # (e2e/webchat_test.go). On a developer's machine without it that one test
  # is skipped, and said so here; under CI (CI set) a browser that cannot be
  # had fails the run, so a green CI always means the browser test ran.
  command -v chromium >/dev/null && return 0
  apt_install chromium && return 0
  if [ -n "${CI:-}" ]; then
    log "ERROR: Chromium is missing and could not be installed; under CI the webchat browser test must run"
    return 1
  fi
  log "WARNING: Chromium is missing and could not be installed (Debian: apt-get install chromium);"
  log "WARNING: the webchat browser test (e2e TestWebchatInTheBrowser) will be SKIPPED"
}

ensure_postgres
ensure_redis
ensure_nats
ensure_database
ensure_chromium
log "PostgreSQL, Redis and NATS are up"
