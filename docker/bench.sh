#!/usr/bin/env bash
# Measures the two-container deployment against `skillbox up` on the host, in one run:
#   1. `compose up -d` (images built, containers new) to a healthy core;
#   2. round trips of the same tool (probe:whoami, python3) through the gateway: the
#      process sandbox in the executor container, a per-call container (boxed:whoami,
#      `execution.sandbox: container`), and the process sandbox of `skillbox up` here;
# and writes the report to target/bench/compose.md (medians, p90, ratios).
#
#   docker/build.sh && docker/bench.sh            # release images
#   SKILLBOX_PROFILE=debug docker/bench.sh        # the host run uses target/debug
#   SKILLBOX_BENCH_CALLS=50 docker/bench.sh       # calls per series (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${SKILLBOX_PROFILE:-release}
calls=${SKILLBOX_BENCH_CALLS:-30}
if docker compose version >/dev/null 2>&1; then compose_cmd=(docker compose); else compose_cmd=(docker-compose); fi
project="skillbox-bench-$$"
work=$(mktemp -d)
export SKILLBOX_ENV_FILE="$work/secrets.env" SKILLBOX_CONFIG=./integration-tests/compose/skillbox.toml \
  SKILLBOX_SKILLS=./integration-tests/compose/skills SKILLBOX_GATEWAY_BIND=127.0.0.1: RUST_LOG=warn
SKILLBOX_DOCKER_GID=$(stat -c %g /var/run/docker.sock)
export SKILLBOX_DOCKER_GID
echo "PROBE_SECRET=bench" >"$SKILLBOX_ENV_FILE"
compose() { "${compose_cmd[@]}" -p "$project" -f compose.yaml -f docker/compose.docker.yaml \
  -f integration-tests/compose/compose.test.yaml "$@"; }
host_pid=""
cleanup() {
  set +e
  compose down -v --remove-orphans --timeout 5 >/dev/null 2>&1
  [ -z "$host_pid" ] || kill -TERM -- "-$host_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }
series() { # gateway token tool -> "median p90" of $calls round trips (ms), after 3 warm-up calls
  local gw=$1 token=$2 tool=$3 t=() s i body
  for i in $(seq 1 $((calls + 3))); do
    s=$(date +%s%N)
    body=$(curl -sS --max-time 60 -H "Authorization: Bearer $token" -d "{\"tool\":\"$tool\",\"args\":{}}" "$gw/v1/tools/call")
    grep -q '"success":true' <<<"$body" || { echo "bench: $tool failed: $body" >&2; exit 1; }
    [ "$i" -le 3 ] || t+=("$((($(date +%s%N) - s) / 1000000))")
  done
  python3 -c 'import statistics,sys; v=sorted(map(int,sys.argv[1:])); print(int(statistics.median(v)), v[int(len(v)*0.9)-1])' "${t[@]}"
}

started=$(now_ms)
compose up -d >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; exit 1; }
core_id=$(compose ps -q core)
until [ "$(docker inspect -f '{{.State.Health.Status}}' "$core_id")" = healthy ]; do
  [ $(($(now_ms) - started)) -lt 120000 ] || { echo "bench: not healthy in 120 s" >&2; exit 1; }
  sleep 0.1
done
up_ms=$(($(now_ms) - started))
gw="http://127.0.0.1:$(compose port core 7070 | awk -F: '{print $NF}')"
token=$(compose exec -T core cat /workspace/.skillbox/api-token | tr -d '\r\n')
read -r c_med c_p90 < <(series "$gw" "$token" probe:whoami)
read -r b_med b_p90 < <(series "$gw" "$token" boxed:whoami)
compose down -v --remove-orphans --timeout 5 >/dev/null 2>&1

# The same skill under `skillbox up` on this machine.
ws="$work/ws"
mkdir -p "$ws/.skillbox"
cp -r integration-tests/compose/skills "$ws/skills"
chmod -R o+rX "$work"
printf '[gateway]\nlisten = "127.0.0.1:0"\n[executor]\nlisten = "127.0.0.1:0"\ncallback_listen = "127.0.0.1:0"\n[docker]\nsocket = "off"\n' >"$ws/skillbox.toml"
echo "PROBE_SECRET=bench" >"$ws/.skillbox/secrets.env"
setsid "target/$profile/skillbox" up --workspace "$ws" >"$work/host.log" 2>&1 &
host_pid=$!
for _ in $(seq 1 600); do [ -s "$ws/.skillbox/gateway.addr" ] && break; sleep 0.1; done
host_gw="http://$(cat "$ws/.skillbox/gateway.addr")"
read -r h_med h_p90 < <(series "$host_gw" "$(cat "$ws/.skillbox/api-token")" probe:whoami)

mkdir -p target/bench
report=target/bench/compose.md
{
  echo "# compose bench ($(date -u +%F), $profile binaries, $calls calls per series after 3 warm-up)"
  echo
  echo "| what | median ms | p90 ms |"
  echo "|---|---|---|"
  echo "| compose up -d to healthy (images built) | $up_ms | |"
  echo "| probe:whoami, skillbox up on the host (process sandbox) | $h_med | $h_p90 |"
  echo "| probe:whoami, two containers (process sandbox in the executor) | $c_med | $c_p90 |"
  echo "| boxed:whoami, two containers + per-call container | $b_med | $b_p90 |"
  echo
  python3 -c 'import sys; h,c,b=map(float,sys.argv[1:]); print(f"containers / host: {c/h:.2f}x; per-call container / process sandbox: {b/c:.2f}x")' "$h_med" "$c_med" "$b_med"
} | tee "$report"
