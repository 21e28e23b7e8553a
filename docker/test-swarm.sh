#!/usr/bin/env bash
# The Swarm end-to-end suite (docs/swarm.md): deploys deploy/swarm/stack.yaml (+ the
# recorder of integration-tests/swarm/stack.test.yaml) as a stack unique to this run, and
# with 8 clients calling throughout scales the executors 2 -> 4 -> 1, kills a replica's
# container, scales to 2 and rolls the executor image; then every call must have been
# answered with success or a clean `unavailable`, and no write tool may have run twice
# (the recorder keeps every nonce `ledger:append` posts through the core's fetch proxy).
# Also checks what of the hardening Swarm applied on the running tasks, and before the
# load runs the compose suite's jobs shaped like published skills (docker/jobs.sh) against
# the stack: files and scripts, Python over HTTPS through the egress proxy, a secret as a
# placeholder, numpy and pillow from a local index, the executor restarted as an operator
# does (`docker service update --force`), a context at its quota, `skill add` against the
# running core, Node.
#
#   docker/test-swarm.sh                        # build the images, then test
#   SKILLBOX_SKIP_BUILD=1 docker/test-swarm.sh  # the images already built (.ci/run)
#   SKILLBOX_SWARM_LOGS=DIR                     # keep the services' logs and the calls there
#
# Joins a single-node swarm only when the engine is in none (`docker swarm init`, on a
# non-loopback address) and leaves it afterwards only then; always removes the stack, its
# volume, networks, secrets and configs. Exit 0 when every check passed, 1 when one failed,
# 2 when Docker is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

if ! docker info >/dev/null 2>&1; then
  echo "test-swarm: no Docker engine answers (docker info failed)" >&2
  exit 2
fi
suite_started=$(date +%s)
if [ "${SKILLBOX_SKIP_BUILD:-0}" != 1 ]; then
  docker/build.sh
fi
export SKILLBOX_CORE_IMAGE=${SKILLBOX_CORE_IMAGE:-skillbox-core:latest}
export SKILLBOX_EXECUTOR_IMAGE=${SKILLBOX_EXECUTOR_IMAGE:-skillbox-executor:latest}

# shellcheck source=docker/swarm-node.sh
. docker/swarm-node.sh
stack="skillbox-e2e-$$"
work=$(mktemp -d)
clients_pid=""
failures=0
passed=0
pass() { passed=$((passed + 1)); echo "  ok    $1"; }
fail() { failures=$((failures + 1)); echo "  FAIL  $1" >&2; [ $# -lt 2 ] || echo "        $2" >&2; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

teardown() {
  local rc=$?
  set +e
  [ -z "$clients_pid" ] || { touch "$work/stop"; kill "$clients_pid" 2>/dev/null; wait "$clients_pid" 2>/dev/null; }
  if [ -n "${SKILLBOX_SWARM_LOGS:-}" ]; then
    mkdir -p "$SKILLBOX_SWARM_LOGS"
    for s in core executor recorder; do docker service logs -t --no-trunc "${stack}_$s" >"$SKILLBOX_SWARM_LOGS/$s.log" 2>&1; done
    cp "$work"/*.jsonl "$work"/*.txt "$SKILLBOX_SWARM_LOGS/" 2>/dev/null
    echo "kill_start=${kill_start:-} kill_end=${kill_end:-}" >"$SKILLBOX_SWARM_LOGS/phases"
  fi
  if [ "$rc" != 0 ] || [ "$failures" != 0 ]; then
    echo "test-swarm: logs of $stack" >&2
    for s in core executor; do docker service logs --raw --tail 40 "${stack}_$s" >&2 2>&1; done
  fi
  local left
  left=$(stack_remove "$stack")
  if [ -n "$left" ]; then
    echo "test-swarm: FAIL the stack left resources behind: $left" >&2
    rc=1
  fi
  swarm_restore || rc=1
  rm -rf "$work"
  echo "test-swarm: $(($(date +%s) - suite_started)) s in all"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# --- a swarm -------------------------------------------------------------------------------
swarm_enter

# --- fixtures --------------------------------------------------------------------------------
# The published-shaped jobs' fixtures (docker/jobs.sh: the suite's CA, the wheels index, the
# greeter repository, PROBE_SECRET), and the operator's skills folder: this suite's skills
# and the compose suite's form-filler and thumbnail, put together in the run's folder (a
# bind mount cannot follow symlinks out of it).
# shellcheck source=docker/jobs.sh
. docker/jobs.sh
jobs_fixtures
mkdir -p "$work/skills"
cp -r integration-tests/swarm/skills/fetcher integration-tests/swarm/skills/ledger \
  integration-tests/compose/skills/form-filler integration-tests/compose/skills/thumbnail "$work/skills/"
chmod -R a+rX "$work/skills"

# --- deploy --------------------------------------------------------------------------------
echo "test-swarm: stack $stack"
docker run --rm --user "$(id -u):$(id -g)" -v "$work:/out" --entrypoint skillbox "$SKILLBOX_CORE_IMAGE" \
  certs channel --out /out/pki >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export SKILLBOX_PKI=$work/pki SKILLBOX_SKILLS=$work/skills \
  SKILLBOX_CONFIG=$repo/integration-tests/swarm/skillbox.toml SKILLBOX_GATEWAY_PORT=$port \
  SKILLBOX_CONFIG_NAME=${stack}_config SKILLBOX_RECORDER_NAME=${stack}_recorder \
  SKILLBOX_RECORDER_PY=$repo/integration-tests/swarm/recorder.py SKILLBOX_EXECUTORS=1 RUST_LOG=info \
  SKILLBOX_TEST_CA_NAME=${stack}_test_ca SKILLBOX_TEST_WWW=$repo/integration-tests/compose/www \
  SKILLBOX_TEST_GITHTTP=$repo/integration-tests/tests/harness/githttp.py
gateway="http://127.0.0.1:$port"
deploy_started=$(now_ms)
docker stack deploy --resolve-image never -c deploy/swarm/stack.yaml -c integration-tests/swarm/stack.test.yaml "$stack" >"$work/deploy.log" 2>&1 ||
  { cat "$work/deploy.log" >&2; exit 1; }

healthy_executors() { # how many executors /healthz lists healthy and not draining
  curl -fsS --max-time 2 "$gateway/healthz" 2>/dev/null |
    python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin)["executors"] if e["healthy"] and not e["draining"]))' 2>/dev/null || echo 0
}
running_tasks() { docker service ps -q --filter desired-state=running "${stack}_executor" | while read -r t; do docker inspect -f '{{.Status.State}}' "$t"; done | grep -c '^running$' || true; }
wait_for() { # what seconds command...: until the command's output is "yes"
  local what=$1 limit=$2 started
  started=$(now_ms)
  shift 2
  until [ "$("$@")" = yes ]; do
    if [ $(($(now_ms) - started)) -gt $((limit * 1000)) ]; then
      fail "$what within ${limit} s"
      return 1
    fi
    sleep 0.5
  done
  pass "$what after $(($(now_ms) - started)) ms"
}
executors_are() { # n: yes when n tasks run and the core routes to exactly n executors
  [ "$(running_tasks)" = "$1" ] && [ "$(healthy_executors)" = "$1" ] && echo yes || echo no
}
servers_up() { # yes when the recorder and the jobs' servers run
  local s
  for s in recorder fetchtarget httpstarget pyindex gitserver; do
    [ "$(docker service ps -q --filter desired-state=running "${stack}_$s" | head -1 | xargs -r docker inspect -f '{{.Status.State}}')" = running ] || { echo no; return; }
  done
  echo yes
}
# One executor at first: thumbnail's environment is built on load there, and the second
# executor joins once it is (scaled below, before the jobs), getting it from the lock. Two
# at once would race the build on load: an executor that starts taking calls while that
# build runs is skipped ("being built") and gets the environment only at the next
# arrival of an executor (core/src/deps/mod.rs, rebuild_on_arrival).
wait_for "deployed: the core routes to 1 executor (tasks.executor)" 120 executors_are 1 || exit 1
wait_for "the recorder and the jobs' servers (fetchtarget, httpstarget, pyindex, gitserver) run" 60 servers_up || exit 1
core=$(docker ps -q --filter "label=com.docker.swarm.service.name=${stack}_core" | head -1)
token=$(docker exec "$core" cat /workspace/.skillbox/api-token | tr -d '\r\n')
echo "test-swarm: deploy to 1 executor routed: $(($(now_ms) - deploy_started)) ms"

# --- hardening as the engine applied it ------------------------------------------------------
echo "test-swarm: hardening on the running tasks"
executor=$(docker ps -q --filter "label=com.docker.swarm.service.name=${stack}_executor" | head -1)
inspect() { docker inspect -f "$2" "$1"; }
[ "$(inspect "$executor" '{{json .HostConfig.CapDrop}}')" = '["ALL"]' ] && pass "executor: cap_drop ALL" || fail "executor: cap_drop ALL" "$(inspect "$executor" '{{json .HostConfig.CapDrop}}')"
caps=$(inspect "$executor" '{{json .HostConfig.CapAdd}}')
[ "$caps" = '["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_NET_ADMIN","CAP_NET_BIND_SERVICE","CAP_SETGID","CAP_SETPCAP","CAP_SETUID","CAP_SYS_ADMIN","CAP_SYS_CHROOT"]' ] && pass "executor: exactly nine capabilities added ($caps)" || fail "executor: nine capabilities" "$caps"
eff=$(docker exec "$executor" awk '/^CapEff/ {print $2}' /proc/1/status)
[ "$eff" = "00000000002415c3" ] && pass "executor: effective capability set of PID 1 is $eff (chown, dac_override, setgid, setuid, setpcap, net_bind_service, net_admin, sys_chroot, sys_admin)" || fail "executor: effective capabilities" "$eff"
net=$(curl -fsS --max-time 5 "$gateway/healthz" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("network", ""))' 2>/dev/null || true)
[ "${net%%:*}" = namespaces ] && pass "executor: network calls get namespaces of their own (/healthz network: ${net%%:*})" || fail "executor: network namespaces" "$net"
# A published-shaped skill's program reaches its granted host through the egress proxy,
# and nothing else, on whichever executor runs it.
fetch_script() { # url -> the script's stdout
  curl -sS --max-time 60 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "{\"tool\":\"run_skill_script\",\"context_id\":\"swarm-net\",\"args\":{\"name\":\"fetcher\",\"script\":\"get.py\",\"args\":[\"$1\"]}}" \
    "$gateway/v1/tools/call" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["data"]["stdout"].strip() if r.get("success") else r)' 2>&1
}
# A service's name on the overlay answers a little after its task runs: the first
# proxied request may meet a 502 before then (seen once right after the deploy).
recorder_reachable() { [ "$(fetch_script http://recorder:8080/log)" = "status 200" ] && echo yes || echo no; }
wait_for "the egress proxy reaches the recorder over the overlay" 30 recorder_reachable || true
for i in 1 2; do
  out=$(fetch_script http://recorder:8080/log)
  [ "$out" = "status 200" ] && pass "a skill's Python reaches its granted host through the egress proxy ($i of 2)" || fail "a skill's Python reaches its granted host ($i of 2)" "$out"
done
out=$(fetch_script http://example.com/)
case $out in *refused:*403*) pass "a skill's Python is refused a host it was not granted (403)" ;; *) fail "a skill's Python is refused a host it was not granted" "$out" ;; esac
for c in "$executor" "$core"; do
  name=$(inspect "$c" '{{index .Config.Labels "com.docker.swarm.service.name"}}')
  [ "$(inspect "$c" '{{.HostConfig.ReadonlyRootfs}}')" = true ] && pass "$name: read-only root" || fail "$name: read-only root"
done
[ "$(inspect "$core" '{{json .HostConfig.CapDrop}}')" = '["ALL"]' ] && [ "$(docker exec "$core" id -u)" = 10001 ] && pass "core: uid 10001, cap_drop ALL" || fail "core: uid 10001, cap_drop ALL"
[ "$(inspect "$executor" '{{json .HostConfig.PidsLimit}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}}')" = "512 1073741824 1000000000" ] &&
  pass "executor: pids 512, memory 1 GiB, 1 CPU" || fail "executor: limits" "$(inspect "$executor" '{{json .HostConfig.Resources}}')"
[ "$(inspect "$executor" '{{.HostConfig.Init}}')" = true ] && pass "executor: init (reaper) in PID 1" || fail "executor: init"
secopt=$(inspect "$executor" '{{json .HostConfig.SecurityOpt}}')
echo "  note  executor SecurityOpt as applied: $secopt (Swarm does not set no-new-privileges; docs/swarm.md)"
for c in "$executor" "$core"; do
  name=$(inspect "$c" '{{index .Config.Labels "com.docker.swarm.service.name"}}')
  setid=$( (docker exec -u 0 "$c" find / -xdev -perm /6000 -type f 2>/dev/null || true) | tr '\n' ' ')
  [ -z "$setid" ] && pass "$name: no setuid/setgid program in the image (what no-new-privileges would have guarded)" || fail "$name: setuid programs" "$setid"
done
core_secrets=$(docker exec "$core" ls /run/secrets | tr '\n' ' ')
[ "$core_secrets" = "ca.pem skillbox-core.key skillbox-core.pem " ] && pass "core: only its own channel files in /run/secrets ($core_secrets)" || fail "core: secrets" "$core_secrets"
exec_nets=$(inspect "$executor" '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}')
[ "$exec_nets" = "${stack}_internal " ] && pass "executor: only the internal overlay network" || fail "executor: networks" "$exec_nets"
body=$(docker exec "$executor" python3 -c 'import socket; s=socket.socket(); s.settimeout(3); s.connect(("1.1.1.1", 53))' 2>&1 || true)
grep -qiE 'unreachable|timed out|refused' <<<"$body" && pass "executor: no route out of the internal overlay" || fail "executor: no route out" "$body"

# --- jobs shaped like published skills -----------------------------------------------------------
# The compose suite's jobs (docker/jobs.sh) against the stack; what differs is below.
echo "test-swarm: published-shaped jobs"
in_executor() { # in the container of a running executor task
  docker exec "$(docker ps -q --filter "label=com.docker.swarm.service.name=${stack}_executor" | head -1)" "$@"
}
core_cli() { docker exec "$core" "$@"; }
fetchtarget_log() { docker service logs --raw "${stack}_fetchtarget"; }
jobs_ping=ledger:ping
# The operator's restart of a Swarm service (docs/swarm.md): `docker service update
# --force`, which replaces every task as a rolling update does (start-first, drained). A
# new task takes a free slot of the node's scratch volume: the one its predecessor left
# (its environments kept) or a new one (the core builds them there from the lock).
restart_executor() {
  docker service update -d --force "${stack}_executor" >"$work/restart.log" 2>&1 || cat "$work/restart.log" >&2
  wait_for "docker service update --force executor: both tasks replaced, one at a time (update completed)" 150 restart_done || true
  wait_for "after the restart the core routes to the 2 new executors" 60 executors_are 2 || true
  wait_for "after the restart every executor holds thumbnail's environment (kept in its slot, or built from the lock)" 120 deps_everywhere || true
}
restart_done() { [ "$(docker service inspect -f '{{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}' "${stack}_executor")" = completed ] && echo yes || echo no; }
deps_everywhere() { # yes when every running executor holds a built environment in its slot
  local c root n=0 have=0
  for c in $(docker ps -q --filter "label=com.docker.swarm.service.name=${stack}_executor"); do
    n=$((n + 1))
    root=$(docker logs "$c" 2>&1 | grep -o 'root=/var/lib/skillbox-executor/[0-9]*' | tail -1 | cut -d= -f2)
    [ -n "$root" ] && docker exec "$c" ls "$root/.deps" 2>/dev/null | grep -Eq '^[0-9a-f]{64}$' && have=$((have + 1))
  done
  [ "$n" -ge 1 ] && [ "$have" = "$n" ] && echo yes || echo no
}
# PROBE_SECRET for form-filler's grant, the way docs/swarm.md tells operators: into the
# state volume's secrets.env on the core's node, then a reload (never the stack's environment).
docker exec -i "$core" sh -c 'cat >> /workspace/.skillbox/secrets.env' <"$work/secrets.env"
reload=$(curl -sS --max-time 30 -X POST -H "Authorization: Bearer $token" "$gateway/v1/skills/reload")
expect "a reload after PROBE_SECRET went into the state volume's secrets.env: core and executor load the 4 skills" "$reload" 'r["loaded"] == 4 and r["executor"]["loaded"] == 4'
# thumbnail, and a context at its quota beside its environment, on the one executor (as in
# the compose suite): a context's files travel to an executor that lacks them in its cache
# within the call, and 4 x 63 MiB to a second executor may take longer than a call's 30 s.
if [ "$have_wheels" = yes ]; then
  jobs_deps
  jobs_quota
fi
docker service scale -d "${stack}_executor=2" >/dev/null
wait_for "scaled 1 -> 2 for the jobs: the core routes to 2" 90 executors_are 2 || exit 1
if [ "$have_wheels" = yes ]; then
  wait_for "the executor that joined got thumbnail's environment from the lock (no operator step)" 120 deps_everywhere || true
fi
jobs_files
jobs_node
jobs_https
jobs_secret
jobs_direct
if [ "$have_wheels" = yes ]; then
  jobs_restart
else
  echo "  SKIPPED dependency jobs (numpy, pillow): no wheels in $wheels and pip could not download them (see above)"
fi
jobs_skill_add

# --- 8 clients through scale, kill and roll ---------------------------------------------------
echo "test-swarm: 8 clients calling throughout"
python3 integration-tests/swarm/clients.py "$gateway" "$token" "$work/calls.jsonl" "$work/stop" 8 &
clients_pid=$!
sleep 4
docker service scale -d "${stack}_executor=4" >/dev/null
wait_for "scaled 2 -> 4: the core routes to 4" 90 executors_are 4 || exit 1
sleep 2
docker service scale -d "${stack}_executor=1" >/dev/null
wait_for "scaled 4 -> 1: the core routes to 1" 90 executors_are 1 || exit 1
sleep 2
live_container() { # the container of the executor task meant to run (not one still draining)
  docker service ps -q --filter desired-state=running "${stack}_executor" | head -1 |
    xargs -r docker inspect -f '{{.Status.ContainerStatus.ContainerID}}'
}
victim=$(live_container)
kill_start=$(date +%s.%N)
docker kill "$victim" >/dev/null
pass "killed the replica's container ${victim:0:12} (SIGKILL, no drain; calls on it or sent meanwhile answer unavailable)"
replaced() { local now; now=$(live_container); [ -n "$now" ] && [ "$now" != "$victim" ] && executors_are 1 || echo no; }
wait_for "the engine replaced it: the core routes to the new one" 90 replaced || exit 1
# The core routes to the new executor now; calls that started a moment before may still
# have found none. One second of margin.
kill_end=$(python3 -c "import time; print(time.time() + 1)")
docker service scale -d "${stack}_executor=2" >/dev/null
wait_for "scaled 1 -> 2" 90 executors_are 2 || exit 1
roll_started=$(now_ms)
docker service update -d --force "${stack}_executor" >/dev/null
update_done() { [ "$(docker service inspect -f '{{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}' "${stack}_executor")" = completed ] && [ "$(executors_are 2)" = yes ] && echo yes || echo no; }
wait_for "rolled the executor image (update --force, start-first): completed" 150 update_done || exit 1
echo "test-swarm: roll took $(($(now_ms) - roll_started)) ms"
sleep 3
touch "$work/stop"
wait "$clients_pid"
clients_pid=""

# --- judge ------------------------------------------------------------------------------------
echo "test-swarm: judging the calls"
recorder=$(docker ps -q --filter "label=com.docker.swarm.service.name=${stack}_recorder" | head -1)
docker exec "$recorder" python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:8080/log").read().decode(), end="")' >"$work/recorded.txt"
python3 integration-tests/swarm/check.py "$work/calls.jsonl" "$work/recorded.txt" "$kill_start" "$kill_end" || failures=$((failures + 1))
# 4 -> 1 stops three executors and the roll two. Swarm takes a stopping task out of
# tasks.executor as it sends SIGTERM, so the core drops it at its next health round; a call
# that still reaches it is refused as draining and goes elsewhere; the executor finishes
# what it holds and exits. The rolled tasks' containers (kept as history) show their drain.
docker service logs --raw "${stack}_core" >"$work/core.log" 2>&1 || true
docker service logs --raw "${stack}_executor" >"$work/executor.log" 2>&1 || true
gone=$( (grep 'executor endpoint gone' "$work/core.log" || true) | grep -oE 'executor=[0-9.:]+' | sort -u | wc -l)
refusals=$( (grep 'refused a call as draining' "$work/core.log" || true) | wc -l)
drained=$( (grep 'executor drained' "$work/executor.log" || true) | wc -l)
abandoned=$( (grep 'drain grace period over' "$work/executor.log" || true) | wc -l)
[ "$gone" -ge 5 ] && pass "the core dropped $gone stopped executors from its pool ($refusals call(s) refused as draining were sent elsewhere)" ||
  fail "the core dropped the 5 stopped executors" "gone: $gone"
[ "$drained" -ge 2 ] && [ "$abandoned" = 0 ] && pass "the rolled executors drained on SIGTERM ($drained 'executor drained' in the logs still kept, none gave up on a call)" ||
  fail "the rolled executors drained" "drained: $drained, abandoned: $abandoned"

echo "swarm: $passed passed, $failures failed"
if [ "$failures" != 0 ]; then
  echo "test-swarm: $failures check(s) failed" >&2
  exit 1
fi
echo "test-swarm: all checks passed"
