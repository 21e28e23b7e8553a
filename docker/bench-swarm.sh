#!/usr/bin/env bash
# Calls per second under Docker Swarm with 1, 2 and 4 executor replicas against
# `skillbox up` on this machine, in one run, and writes target/bench/swarm.md.
#
#   docker/bench-swarm.sh                             # release binaries and images
#   SKILLBOX_PROFILE=debug docker/bench-swarm.sh      # target/debug (say so when quoting)
#   SKILLBOX_SKIP_BUILD=1 docker/bench-swarm.sh       # the bench images already built
#   SKILLBOX_BENCH_CLIENTS=16 SKILLBOX_BENCH_SECONDS=15 docker/bench-swarm.sh
#
# Each series: CLIENTS closed-loop clients (keep-alive) call `ledger:ping` (a `plain` tool:
# `sh -c 'echo pong'`) for WARMUP + SECONDS; only SECONDS count. The images are tagged
# skillbox-core:bench / skillbox-executor:bench (built from the same binaries `up` runs) and
# removed afterwards. Joins a single-node swarm only when the engine is in none, and leaves
# it afterwards. Nothing here asserts a time: the report gives the numbers and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

profile=${SKILLBOX_PROFILE:-release}
clients=${SKILLBOX_BENCH_CLIENTS:-16}
warmup=${SKILLBOX_BENCH_WARMUP:-3}
seconds=${SKILLBOX_BENCH_SECONDS:-15}
export SKILLBOX_CORE_IMAGE=skillbox-core:bench SKILLBOX_EXECUTOR_IMAGE=skillbox-executor:bench
if [ "${SKILLBOX_SKIP_BUILD:-0}" != 1 ]; then
  SKILLBOX_PROFILE=$profile docker/build.sh
fi
for image in "$SKILLBOX_CORE_IMAGE" "$SKILLBOX_EXECUTOR_IMAGE"; do
  docker image inspect "$image" >/dev/null 2>&1 || {
    echo "bench-swarm: image $image is missing: run without SKILLBOX_SKIP_BUILD (the bench removes its images unless SKILLBOX_KEEP_BENCH_IMAGES=1)" >&2
    exit 1
  }
done
for bin in skillbox skillbox-executor; do
  [ -x "target/$profile/$bin" ] || { echo "bench-swarm: target/$profile/$bin is missing (cargo build --$profile?)" >&2; exit 1; }
done

# shellcheck source=docker/swarm-node.sh
. docker/swarm-node.sh
stack="skillbox-bench-$$"
work=$(mktemp -d)
host_pid=""
cleanup() {
  set +e
  [ -z "$host_pid" ] || kill -TERM -- "-$host_pid" 2>/dev/null
  left=$(stack_remove "$stack")
  [ -z "$left" ] || echo "bench-swarm: the stack left resources behind: $left" >&2
  swarm_restore
  [ "${SKILLBOX_KEEP_BENCH_IMAGES:-0}" = 1 ] || docker image rm "$SKILLBOX_CORE_IMAGE" "$SKILLBOX_EXECUTOR_IMAGE" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
now_ms() { echo $(($(date +%s%N) / 1000000)); }
load() { # host:port token -> one JSON line
  python3 integration-tests/swarm/load.py "$1" "$2" ledger:ping "$clients" "$warmup" "$seconds"
}
cpu_sample() { # the stack's containers' CPU % halfway through a series
  sleep $(((warmup + seconds) / 2))
  docker stats --no-stream --format '{{.Name}} {{.CPUPerc}}' $(docker ps -q --filter "label=com.docker.stack.namespace=$stack") |
    sed -E 's/^[^_]*_([a-z]+)\.[0-9]+\.[a-z0-9]+/\1/' | sort | tr '\n' ';'
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
started_load=$(loadavg)

# --- skillbox up on this machine -----------------------------------------------------------
ws="$work/ws"
mkdir -p "$ws/.skillbox"
cp -r integration-tests/swarm/skills "$ws/skills"
chmod -R o+rX "$work"
printf '[gateway]\nlisten = "127.0.0.1:0"\n[executor]\nlisten = "127.0.0.1:0"\ncallback_listen = "127.0.0.1:0"\n[docker]\nsocket = "off"\n' >"$ws/skillbox.toml"
RUST_LOG=warn setsid "target/$profile/skillbox" up --workspace "$ws" >"$work/host.log" 2>&1 &
host_pid=$!
for _ in $(seq 1 600); do [ -s "$ws/.skillbox/gateway.addr" ] && break; sleep 0.1; done
[ -s "$ws/.skillbox/gateway.addr" ] || { cat "$work/host.log" >&2; exit 1; }
echo "bench-swarm: skillbox up, $clients clients, ${seconds} s"
up_result=$(load "$(cat "$ws/.skillbox/gateway.addr")" "$(cat "$ws/.skillbox/api-token")")
echo "  up: $up_result"
kill -TERM -- "-$host_pid" 2>/dev/null || true
wait "$host_pid" 2>/dev/null || true
host_pid=""

# --- the stack -----------------------------------------------------------------------------
swarm_enter
"target/$profile/skillbox" certs channel --out "$work/pki" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The shipped config: the suite's (integration-tests/swarm/skillbox.toml) names servers and
# a CA that only its stack.test.yaml deploys.
export SKILLBOX_PKI=$work/pki SKILLBOX_SKILLS=$ws/skills SKILLBOX_GATEWAY_PORT=$port \
  SKILLBOX_CONFIG=$repo/deploy/swarm/skillbox.toml SKILLBOX_CONFIG_NAME=${stack}_config \
  SKILLBOX_EXECUTORS=1 RUST_LOG=warn
docker stack deploy --resolve-image never -c deploy/swarm/stack.yaml "$stack" >"$work/deploy.log" 2>&1 ||
  { cat "$work/deploy.log" >&2; exit 1; }
routed() { # n: the core routes to n executors
  curl -fsS --max-time 2 "http://127.0.0.1:$port/healthz" 2>/dev/null |
    python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["executors"] if e["healthy"] and not e["draining"]))' 2>/dev/null || echo 0
}
token=""
declare -A result cpu
for n in 1 2 4; do
  docker service scale -d "${stack}_executor=$n" >/dev/null
  t0=$(now_ms)
  until [ "$(routed)" = "$n" ]; do
    [ $(($(now_ms) - t0)) -lt 180000 ] || { echo "bench-swarm: $n executors not routed in 180 s" >&2; exit 1; }
    sleep 0.5
  done
  if [ -z "$token" ]; then
    token=$(docker exec "$(docker ps -q --filter "label=com.docker.swarm.service.name=${stack}_core" | head -1)" cat /workspace/.skillbox/api-token | tr -d '\r\n')
  fi
  cpu_sample >"$work/cpu.$n" &
  result[$n]=$(load "127.0.0.1:$port" "$token")
  wait
  cpu[$n]=$(cat "$work/cpu.$n")
  echo "  swarm, $n executor(s): ${result[$n]}"
  echo "    cpu: ${cpu[$n]}"
done

# --- report --------------------------------------------------------------------------------
mkdir -p target/bench
report=target/bench/swarm.md
UP="$up_result" S1="${result[1]}" S2="${result[2]}" S4="${result[4]}" \
C1="${cpu[1]}" C2="${cpu[2]}" C4="${cpu[4]}" python3 - "$profile" "$clients" "$seconds" "$(nproc)" "$started_load" "$(loadavg)" <<'EOF' | tee "$report"
import json, os, sys
profile, clients, seconds, cores, load0, load1 = sys.argv[1:]
up = json.loads(os.environ["UP"])
rows = [("skillbox up (host, one executor process)", up, "")]
for n in ("1", "2", "4"):
    rows.append((f"Swarm, {n} executor replica(s)", json.loads(os.environ["S" + n]), os.environ["C" + n]))
s1 = rows[1][1]["calls_per_s"]
print(f"# Swarm bench: calls/s by executor replicas ({profile} binaries)\n")
print(f"{clients} closed-loop clients, `ledger:ping` (a plain `sh` tool), {seconds} s counted per series; "
      f"{cores} cores; load average {load0} at the start, {load1} at the end.\n")
print("| series | calls/s | vs up | vs 1 replica | p50 ms | p90 ms | failed |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, r, _ in rows:
    print(f"| {name} | {r['calls_per_s']} | {r['calls_per_s'] / up['calls_per_s']:.2f} | "
          f"{r['calls_per_s'] / s1:.2f} | {r['p50_ms']} | {r['p90_ms']} | {r['failures']} |")
print("\nCPU of the stack's containers halfway through each Swarm series (`docker stats`):\n")
for name, _, c in rows[1:]:
    print(f"- {name}: {c.replace(';', '; ')}")
EOF
echo "bench-swarm: report in $report"
