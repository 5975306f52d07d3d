#!/usr/bin/env bash
# `make run`: the whole suite on this machine. Makes sure PostgreSQL, Redis and
# NATS are up, runs the services (each applies its own migrations at start)
# with prefixed logs, seeds the demo workspace, prints how to reach it, and
# stops everything on Ctrl-C. Expects `make build` to have filled bin/.
set -euo pipefail
cd "$(dirname "$0")/.."

SERVICES=(gateway messaging webhook-dispatcher)
declare -A PORTS=([gateway]=8080 [messaging]=8081 [webhook-dispatcher]=8082)

# Local development defaults; anything already in the environment wins.
export LOG_FORMAT=${LOG_FORMAT:-console}
export WEBHOOK_ALLOW_PRIVATE_TARGETS=${WEBHOOK_ALLOW_PRIVATE_TARGETS:-true}
export GATEWAY_ADDR=${GATEWAY_ADDR:-:${PORTS[gateway]}}
export MESSAGING_ADDR=${MESSAGING_ADDR:-:${PORTS[messaging]}}
export DISPATCHER_ADDR=${DISPATCHER_ADDR:-:${PORTS[webhook-dispatcher]}}

scripts/deps.sh

pids=()
# Without a real bot (DEMO_TELEGRAM_TOKEN and TELEGRAM_API_BASE unset), the
# Telegram sandbox plays the Bot API and prints what the bot would send.
if [ -z "${TELEGRAM_API_BASE:-}" ] && [ -z "${DEMO_TELEGRAM_TOKEN:-}" ]; then
  export TELEGRAM_SANDBOX_ADDR=${TELEGRAM_SANDBOX_ADDR:-127.0.0.1:8089}
  export TELEGRAM_API_BASE="http://$TELEGRAM_SANDBOX_ADDR"
  bin/telegram-sandbox > >(sed -u "s/^/[telegram] /") 2>&1 &
  pids+=($!)
fi
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping services..."
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "stopped"
}
trap stop INT TERM EXIT

port_of() { # addr -> port
  echo "${1##*:}"
}

for s in "${SERVICES[@]}"; do
  [ -x "bin/$s" ] || { echo "bin/$s is missing: run make build" >&2; exit 1; }
  # Each service's output is prefixed with its name; $! is the service
  # itself, so the trap above signals it directly and sed ends with it.
  "bin/$s" > >(sed -u "s/^/[$s] /") 2>&1 &
  pids+=($!)
done

declare -A ADDRS=([gateway]=$GATEWAY_ADDR [messaging]=$MESSAGING_ADDR [webhook-dispatcher]=$DISPATCHER_ADDR)
for s in "${SERVICES[@]}"; do
  port=$(port_of "${ADDRS[$s]}")
  ready=
  for _ in $(seq 1 120); do
    if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=1; break; fi
    sleep 0.25
  done
  [ -n "$ready" ] || { echo "$s did not become ready on port $port (see its log above)" >&2; exit 1; }
done

demo=$(bin/parleyctl demo)
gateway_url=$(sed -n 's/.*"gateway_url": "\(.*\)".*/\1/p' <<<"$demo")
api_key=$(sed -n 's/.*"api_key": "\(.*\)".*/\1/p' <<<"$demo")
ingress=$(sed -n 's/.*"url": "\(.*\/ingress\/telegram\/.*\)".*/\1/p' <<<"$demo")
secret=$(sed -n 's/.*"secret_token": "\(.*\)".*/\1/p' <<<"$demo")
webchat=$(sed -n 's/.*"webchat_url": "\(.*\)".*/\1/p' <<<"$demo")

cat <<MSG

  Parley is up.

  Gateway:            $gateway_url
  Demo API key:       $api_key
  Webchat widget:     $webchat
  Telegram ingress:   $ingress
  Ingress secret:     $secret
  Telegram API:       $TELEGRAM_API_BASE

  Try:  curl -s -H "Authorization: Bearer $api_key" $gateway_url/v1/me
  The README's "Getting started" walks the whole path. Ctrl-C stops everything.

MSG

# Ctrl-C reaches the services too (one process group), so a service that
# ends with 0 or by SIGINT/SIGTERM is the normal stop; anything else is a crash.
status=0
wait -n "${pids[@]}" || status=$?
case $status in
  0|130|143) ;;
  *) echo "a service exited with status $status; stopping the rest" >&2 ;;
esac
