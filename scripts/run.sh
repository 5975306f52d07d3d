#!/usr/bin/env bash
# `make run`: the whole suite on this machine. Makes sure PostgreSQL, Redis and
# NATS are up, runs the services (each applies its own migrations at start)
# with prefixed logs, seeds the demo workspace and a console sign-in for it,
# prints how to reach them, and stops everything on Ctrl-C, SIGTERM, or a
# signal to `make` itself. Expects `make build` to have filled bin/ (or
# PARLEY_BIN, another directory of the same binaries).
#
# Stopping: each service gets one SIGTERM and is waited for while it shuts
# down in order (pkg/service); its log prefixer outlives it and ends when the
# service's output does, so its last lines, "stopped" included, are shown;
# nothing is left running, and a clean stop exits 0 (docs/operations.md
# "Stopping make run").
set -euo pipefail
cd "$(dirname "$0")/.."

# A background job of a script (a non-interactive shell) starts with SIGINT
# and SIGQUIT ignored, and bash cannot trap a signal that was ignored when it
# started: run again with their default actions, so that a SIGINT to the
# group stops everything as a terminal's Ctrl-C does.
sig_ignored() { # PID SIGNUM: whether PID ignores the signal (Linux)
  local key mask
  [ -r "/proc/$1/status" ] || return 1
  while read -r key mask; do
    if [ "$key" = SigIgn: ]; then
      (((16#$mask >> ($2 - 1)) & 1))
      return
    fi
  done <"/proc/$1/status"
  return 1
}
if sig_ignored $$ 2 && [ -z "${PARLEY_RUN_SIGNALS_RESET:-}" ] && env --default-signal=INT true 2>/dev/null; then
  export PARLEY_RUN_SIGNALS_RESET=1
  exec env --default-signal=INT,QUIT "$0" "$@"
fi

BIN=${PARLEY_BIN:-bin}
SERVICES=(gateway messaging webhook-dispatcher flow-runner console)
declare -A PORTS=([gateway]=8080 [messaging]=8081 [webhook-dispatcher]=8082 [flow-runner]=8083 [console]=8084)

# The console's demo operator, a sign-in to the demo workspace. Published
# here like the demo API key: for local use only.
DEMO_OPERATOR_EMAIL=demo@parley.local
DEMO_OPERATOR_PASSWORD=parley-demo-local-only

# Local development defaults; anything already in the environment wins.
# Loopback only: this setup has a published demo API key and lets webhooks
# reach private addresses (flow http nodes too: the demo flow calls the
# flow-runner's own /healthz). Set an *_ADDR (":8080") to expose a service on
# purpose.
export LOG_FORMAT=${LOG_FORMAT:-console}
export WEBHOOK_ALLOW_PRIVATE_TARGETS=${WEBHOOK_ALLOW_PRIVATE_TARGETS:-true}
export GATEWAY_ADDR=${GATEWAY_ADDR:-127.0.0.1:${PORTS[gateway]}}
export MESSAGING_ADDR=${MESSAGING_ADDR:-127.0.0.1:${PORTS[messaging]}}
export DISPATCHER_ADDR=${DISPATCHER_ADDR:-127.0.0.1:${PORTS[webhook-dispatcher]}}
export FLOW_RUNNER_ADDR=${FLOW_RUNNER_ADDR:-127.0.0.1:${PORTS[flow-runner]}}
export CONSOLE_ADDR=${CONSOLE_ADDR:-127.0.0.1:${PORTS[console]}}
declare -A ADDRS=([gateway]=$GATEWAY_ADDR [messaging]=$MESSAGING_ADDR [webhook-dispatcher]=$DISPATCHER_ADDR [flow-runner]=$FLOW_RUNNER_ADDR [console]=$CONSOLE_ADDR)

for s in "${SERVICES[@]}" parleyctl telegram-sandbox llm-sandbox; do
  [ -x "$BIN/$s" ] || { echo "$BIN/$s is missing: run make build" >&2; exit 1; }
done

scripts/deps.sh

logs=$(mktemp -d)
pids=()        # what stop signals: the services and the sandboxes
declare -A names # each of pids' name, for what it says of them
prefixers=()   # their log prefixers
watcher=       # see watch_make

# start NAME COMMAND...: runs COMMAND in the background, its output prefixed
# with "[NAME] " through a FIFO. The prefixer ignores INT, TERM and PIPE, so
# the terminal's Ctrl-C (sent to the whole process group) cannot end it
# before its process has finished shutting down; it ends at end of input,
# once its process has exited.
start() {
  local name=$1
  shift
  mkfifo "$logs/$name"
  (trap '' INT TERM PIPE; exec sed -u "s/^/[$name] /" <"$logs/$name") &
  prefixers+=($!)
  "$@" >"$logs/$name" 2>&1 &
  pids+=($!)
  names[$!]=$name
}

# stop stops every process and waits for each; it fails when one of them
# ended with a failure of its own (each exits 0 on SIGTERM once it has shut
# down in order), saying which.
stopping=
stop() {
  [ -z "$stopping" ] || return 0
  stopping=1
  # The stop runs to its end whatever else arrives, even with the terminal
  # or a | tee gone (PIPE).
  trap '' INT TERM HUP PIPE
  echo
  echo "stopping..."
  [ -z "$watcher" ] || kill "$watcher" 2>/dev/null || true
  local pid status failed=0
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for pid in "${pids[@]}"; do
      while :; do
        status=0
        wait "$pid" 2>/dev/null || status=$?
        # A second signal that came before the trap above ignored it
        # (make hands its SIGTERM on to a group that got one already)
        # ends this wait early, as 128 + its number, while the process
        # still shuts down: wait for it again.
        if [ "$status" -gt 128 ] && kill -0 "$pid" 2>/dev/null; then
          continue
        fi
        break
      done
      # 127, or -1 from a bash whose interrupted wait -n below took the
      # process's end: reaped already.
      if [ "$status" != 0 ] && [ "$status" != 127 ] && [ "$status" != -1 ]; then
        echo "${names[$pid]} exited with status $status while stopping" >&2
        failed=1
      fi
    done
    wait "${prefixers[@]}" 2>/dev/null || true
  fi
  rm -rf "$logs"
  echo "stopped"
  return "$failed"
}
# A signal is a request to stop: a clean stop exits 0, so that make reports
# no error (make itself still ends as the signal it got asks, as any program
# does). A second signal (make hands its SIGTERM on to a group that got one
# already) may arrive before stop ignores the rest: the stop under way goes
# on.
on_signal() {
  [ -z "$stopping" ] || return 0
  stop && exit 0
  exit 1
}
trap on_signal INT TERM HUP
trap stop EXIT

# catches_int PID: whether PID has a SIGINT handler installed (Linux; bash
# builtins only, so the watcher below runs no child process).
catches_int() {
  local key mask
  [ -r "/proc/$1/status" ] || return 1
  while read -r key mask; do
    if [ "$key" = SigCgt: ]; then
      (((16#$mask >> 1) & 1))
      return
    fi
  done <"/proc/$1/status"
  return 1
}

# watch_make: GNU make hands a SIGTERM on to its recipe, but on SIGINT it only
# waits for the recipe, trusting the terminal to have signalled the whole
# group; a SIGINT sent to make alone (kill -INT) would stop nothing. It shows
# as make dropping its SIGINT handler, which this watches for.
watch_make() {
  local parent=$PPID
  local comm=
  read -r comm <"/proc/$parent/comm" 2>/dev/null || true
  [ "$comm" = make ] && catches_int "$parent" || return 0
  mkfifo "$logs/.watch"
  (
    # read -t on a FIFO no one writes is a sleep without a child process,
    # so killing the watcher leaves nothing behind.
    exec 3<>"$logs/.watch"
    while kill -0 $$ 2>/dev/null; do
      catches_int "$parent" || { kill -INT $$; exit; }
      read -r -t 0.5 -u 3 || true
    done
  ) &
  watcher=$!
}
watch_make

port_of() { # addr -> port
  echo "${1##*:}"
}

local_url() { # addr -> the URL a browser on this machine opens
  local host=${1%:*}
  case $host in "" | 0.0.0.0 | "[::]") host=localhost ;; esac
  echo "http://$host:$(port_of "$1")"
}

# Without a real bot (DEMO_TELEGRAM_TOKEN and TELEGRAM_API_BASE unset), the
# Telegram sandbox plays the Bot API and prints what the bot would send.
if [ -z "${TELEGRAM_API_BASE:-}" ] && [ -z "${DEMO_TELEGRAM_TOKEN:-}" ]; then
  export TELEGRAM_SANDBOX_ADDR=${TELEGRAM_SANDBOX_ADDR:-127.0.0.1:8089}
  export TELEGRAM_API_BASE="http://$TELEGRAM_SANDBOX_ADDR"
  start telegram "$BIN/telegram-sandbox"
fi

# Without a real LLM provider (LLM_BASE_URL unset), the LLM sandbox plays an
# OpenAI-compatible one: deterministic answers labelled [sandbox], each
# request printed. Without a guard configured, its moderation endpoint is the
# safety guard (the AI nodes and the assistant send nothing without one:
# docs/chat.md "The assistant"); beside a real provider, a block list stands
# in, so that AI text can be sent (and blocked) locally.
guard_configured=
[ -z "${GUARD_BASE_URL:-}" ] && [ -z "${GUARD_BLOCKLIST:-}" ] || guard_configured=1
if [ -z "${LLM_BASE_URL:-}" ]; then
  export LLM_SANDBOX_ADDR=${LLM_SANDBOX_ADDR:-127.0.0.1:8090}
  export LLM_BASE_URL="http://$LLM_SANDBOX_ADDR/v1"
  export LLM_MODEL=${LLM_MODEL:-sandbox}
  export LLM_PRICES=${LLM_PRICES:-sandbox=0/0}
  [ -n "$guard_configured" ] || export GUARD_BASE_URL=$LLM_BASE_URL
  start llm "$BIN/llm-sandbox" -addr "$LLM_SANDBOX_ADDR"
elif [ -z "$guard_configured" ]; then
  export GUARD_BLOCKLIST="forbidden,badword"
fi

for s in "${SERVICES[@]}"; do
  start "$s" "$BIN/$s"
done

for s in "${SERVICES[@]}"; do
  port=$(port_of "${ADDRS[$s]}")
  ready=
  for _ in $(seq 1 120); do
    if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=1; break; fi
    sleep 0.25
  done
  [ -n "$ready" ] || { echo "$s did not become ready on port $port (see its log above)" >&2; exit 1; }
done

demo=$("$BIN/parleyctl" demo)
gateway_url=$(sed -n 's/.*"gateway_url": "\(.*\)".*/\1/p' <<<"$demo")
api_key=$(sed -n 's/.*"api_key": "\(.*\)".*/\1/p' <<<"$demo")
ingress=$(sed -n 's/.*"url": "\(.*\/ingress\/telegram\/.*\)".*/\1/p' <<<"$demo")
secret=$(sed -n 's/.*"secret_token": "\(.*\)".*/\1/p' <<<"$demo")
webchat=$(sed -n 's/.*"webchat_url": "\(.*\)".*/\1/p' <<<"$demo")
flow_id=$(sed -n 's/.*"flow_id": "\(.*\)".*/\1/p' <<<"$demo")
ai_flow_id=$(sed -n 's/.*"ai_flow_id": "\(.*\)".*/\1/p' <<<"$demo")
workspace_id=$(sed -n '/"workspace": {/,/}/s/.*"id": "\(.*\)".*/\1/p' <<<"$demo")
[ -n "$workspace_id" ] || { echo "parleyctl demo printed no workspace id:" >&2; echo "$demo" >&2; exit 1; }

# The demo operator, created once: a later make run finds it (409
# operator_exists) and keeps it as it is.
if ! created=$(printf '%s' "$DEMO_OPERATOR_PASSWORD" |
  "$BIN/parleyctl" operator create --email "$DEMO_OPERATOR_EMAIL" --workspace "$workspace_id" --password-stdin 2>&1); then
  case $created in
    *operator_exists*) ;;
    *) echo "could not create the console's demo operator: $created" >&2; exit 1 ;;
  esac
fi
console_url=$(local_url "$CONSOLE_ADDR")

cat <<MSG

  Parley is up.

  Gateway:            $gateway_url
  API reference:      $gateway_url/docs
  Demo API key:       $api_key
  Webchat widget:     $webchat
  Telegram ingress:   $ingress
  Ingress secret:     $secret
  Telegram API:       $TELEGRAM_API_BASE
  Demo flow:          $flow_id
  Demo AI flow:       $ai_flow_id
  LLM provider:       $LLM_BASE_URL
  Safety guard:       ${GUARD_BASE_URL:-block list}
  Console:            $console_url
  Console sign-in:    $DEMO_OPERATOR_EMAIL / $DEMO_OPERATOR_PASSWORD (the demo workspace; local use only)

  Try:  curl -s -H "Authorization: Bearer $api_key" $gateway_url/v1/me
        curl -s -H "Authorization: Bearer $api_key" -H 'Content-Type: application/json' \\
          -d '{"input":{}}' $gateway_url/v1/flows/$flow_id/invoke
        curl -s -H "Authorization: Bearer $api_key" -H 'Content-Type: application/json' \\
          -d '{"input":{"question":"How many days do I have to return an item?"}}' $gateway_url/v1/flows/$ai_flow_id/invoke
  The README's quick start goes on from there.
  Ctrl-C stops everything.

MSG

# A process that ends by itself has failed (a signal runs the traps above
# instead); the rest are stopped on the way out.
status=0
ended=
wait -n -p ended "${pids[@]}" || status=$?
name="a process"
[ -z "$ended" ] || name=${names[$ended]}
echo "$name exited with status $status; stopping the rest" >&2
exit 1
