#!/usr/bin/env bash
# The compose end-to-end suite: builds the images (offline path when no registry answers),
# brings compose.yaml (+ integration-tests/compose/compose.test.yaml: the servers skills
# reach, and docker/compose.docker.yaml: the core's Docker socket; the executor service
# stays exactly as shipped, which the suite checks) up under a project name unique to this
# run, checks both walls around a tool, runs jobs shaped like published skills (files and
# scripts, Python over HTTPS through the egress proxy, a secret as a placeholder, numpy and
# pillow from a local index, Node, a restart of the executor, a context at its quota,
# `skill add` against the running core), takes each capability of the executor container
# away once to see what breaks, and always tears the project down (`down -v`).
#
#   docker/test-compose.sh                        # build + test
#   SKILLBOX_SKIP_BUILD=1 docker/test-compose.sh  # test the images already built
#   SKILLBOX_SKIP_CARGO=1 docker/test-compose.sh  # images from target/release as it is
#   SKILLBOX_COMPOSE_OVERRIDE=FILE                # one more compose file (weaken, see checks fail)
#
# Works with `docker compose` (v2) or `docker-compose` (v1). Exit 0 when every check
# passed, 1 when one failed, 2 when Docker or compose is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! docker info >/dev/null 2>&1; then
  echo "test-compose: no Docker engine answers (docker info failed)" >&2
  exit 2
fi
if docker compose version >/dev/null 2>&1; then
  compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null; then
  compose_cmd=(docker-compose)
else
  echo "test-compose: neither 'docker compose' nor 'docker-compose' is installed" >&2
  exit 2
fi

suite_started=$(date +%s)
if [ "${SKILLBOX_SKIP_BUILD:-0}" != 1 ]; then
  docker/build.sh
fi
export SKILLBOX_CORE_IMAGE=${SKILLBOX_CORE_IMAGE:-skillbox-core:latest}
export SKILLBOX_EXECUTOR_IMAGE=${SKILLBOX_EXECUTOR_IMAGE:-skillbox-executor:latest}

project="skillbox-e2e-$$-$(date +%s)"
# The executor image extended by EXTRA_DEBIAN_PACKAGES (built and removed by the suite).
extra_executor="skillbox-executor-extra:$project"
extra_core="skillbox-core-extra:$project"
work=$(mktemp -d)
# The fixtures of the published-shaped jobs (docker/jobs.sh): the suite's CA and
# httpstarget's certificate, the wheels index, the greeter repository, PROBE_SECRET.
# shellcheck source=docker/jobs.sh
. docker/jobs.sh
jobs_fixtures
export SKILLBOX_ENV_FILE="$work/secrets.env"
export SKILLBOX_CONFIG=./integration-tests/compose/skillbox.toml
export SKILLBOX_SKILLS=./integration-tests/compose/skills
export SKILLBOX_GATEWAY_BIND=127.0.0.1:   # an ephemeral host port
export RUST_LOG=info
# The core gets the Docker socket (docker/compose.docker.yaml): the supervisor and the
# per-call containers of `execution.sandbox: container` are under test too.
SKILLBOX_DOCKER_GID=$(stat -c %g /var/run/docker.sock)
export SKILLBOX_DOCKER_GID
files=(-f compose.yaml -f docker/compose.docker.yaml -f integration-tests/compose/compose.test.yaml)
# One more compose file on top, e.g. to weaken the deployment and see the checks fail.
[ -z "${SKILLBOX_COMPOSE_OVERRIDE:-}" ] || files+=(-f "$SKILLBOX_COMPOSE_OVERRIDE")
compose() {
  "${compose_cmd[@]}" -p "$project" "${files[@]}" "$@"
}

failures=0
passed=0
pass() { passed=$((passed + 1)); echo "  ok    $1"; }
fail() { failures=$((failures + 1)); echo "  FAIL  $1" >&2; [ $# -lt 2 ] || echo "        $2" >&2; }
in_executor() { docker exec "$executor_id" "$@"; }
core_cli() { compose exec -T core "$@"; }
fetchtarget_log() { docker logs "$fetch_id"; }
# `docker compose restart executor`: within its stop grace period (jobs_restart checks the
# rest: calls and thumbnail come back with no operator step).
restart_executor() {
  local restart_started restart_ms
  restart_started=$(date +%s%N)
  compose restart executor >"$work/restart.log" 2>&1 || cat "$work/restart.log" >&2
  restart_ms=$((($(date +%s%N) - restart_started) / 1000000))
  expect "compose restart executor takes less than its 30 s stop grace period (${restart_ms} ms)" "$restart_ms" 'r < 30000'
}

teardown() {
  local rc=$?
  set +e
  if [ "$rc" != 0 ] || [ "$failures" != 0 ]; then
    echo "test-compose: logs of $project" >&2
    compose logs --no-color --tail=60 >&2 2>&1
  fi
  compose down -v --remove-orphans --timeout 5 >/dev/null 2>&1
  [ -z "${extra_build:-}" ] || { kill "$extra_build" 2>/dev/null; wait "$extra_build" 2>/dev/null; }
  docker rmi -f "$extra_executor" "$extra_core" >/dev/null 2>&1
  local left
  left=$(docker ps -aq --filter "label=com.docker.compose.project=$project"
    docker ps -aq --filter "label=dev.skillbox.owner=compose:$project"
    docker network ls -q --filter "label=com.docker.compose.project=$project"
    docker volume ls -q --filter "label=com.docker.compose.project=$project")
  if [ -n "$left" ]; then
    echo "test-compose: FAIL compose down left resources behind: $left" >&2
    rc=1
  fi
  rm -rf "$work"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# The executor image extended with the gallery's programs (checked at the end): built in
# the background while the deployment is tested, since most of its time is apt's
# downloads and unpacking, and the suite mostly waits on the deployment.
extra_packages="jq libreoffice-calc-nogui libreoffice-writer-nogui chromium-headless-shell default-jdk-headless"
(
  extra_started=$(date +%s)
  SKILLBOX_SKIP_CARGO=1 SKILLBOX_EXTRA_DEBIAN_PACKAGES="$extra_packages" SKILLBOX_EXECUTOR_IMAGE="$extra_executor" \
    SKILLBOX_CORE_IMAGE="$extra_core" SKILLBOX_BASE_IMAGE="${SKILLBOX_BASE_IMAGE:-skillbox-base:bookworm}" \
    docker/build.sh >"$work/extra.log" 2>&1
  echo $? >"$work/extra.rc"
  echo $(($(date +%s) - extra_started)) >"$work/extra.secs"
) &
extra_build=$!

# --- up to healthy -----------------------------------------------------------------------
echo "test-compose: project $project (${compose_cmd[*]})"
up_started=$(date +%s%N)
compose up -d >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; exit 1; }
core_id=$(compose ps -q core)
executor_id=$(compose ps -q executor)
fetch_id=$(compose ps -q fetchtarget)
port=$(compose port core 7070 | awk -F: '{print $NF}')
gateway="http://127.0.0.1:$port"
ready_ms=""
health=""
for _ in $(seq 1 240); do
  if [ -z "$ready_ms" ] && curl -fsS --max-time 2 "$gateway/healthz" 2>/dev/null | grep -q '"executor":"ok"'; then
    ready_ms=$((($(date +%s%N) - up_started) / 1000000))
  fi
  health=$(docker inspect -f '{{.State.Health.Status}}' "$core_id")
  [ "$health" = healthy ] && break
  sleep 0.25
done
up_ms=$((($(date +%s%N) - up_started) / 1000000))
if [ "$health" != healthy ]; then
  fail "compose up: the core is healthy (executor answering over mTLS)" "health: $health"
  exit 1
fi
pass "compose up: gateway answers with the executor ok after ${ready_ms:-?} ms; Docker reports healthy after ${up_ms} ms"

# The executor service as the suite runs it is the one compose.yaml ships: the added files
# touch the core (its socket, the suite's CA) and add servers, never the executor.
executor_service='import json,sys,yaml
e = yaml.safe_load(sys.stdin)["services"]["executor"]
def same(k, v):  # the order of lists and an empty network entry differ between merges
    if isinstance(v, list) and k != "command":
        return sorted(v)
    if k == "networks" and isinstance(v, dict):
        return {n: c or {} for n, c in v.items()}
    return v
print(json.dumps({k: same(k, v) for k, v in e.items()}, sort_keys=True))'
shipped=$("${compose_cmd[@]}" -p "$project" -f compose.yaml config 2>/dev/null |
  python3 -c "$executor_service" 2>/dev/null || echo '"unreadable"')
merged=$(compose config 2>/dev/null | python3 -c "$executor_service" 2>/dev/null || echo '"unreadable merged"')
if [ -n "${SKILLBOX_COMPOSE_OVERRIDE:-}" ]; then
  echo "  (SKILLBOX_COMPOSE_OVERRIDE given: the executor is not as shipped on purpose)"
elif [ "$shipped" = "$merged" ] && [ "$shipped" != '"unreadable"' ]; then
  pass "the executor service runs exactly as compose.yaml ships it (no file of the suite changes it)"
else
  fail "the executor service runs exactly as compose.yaml ships it" "$shipped vs $merged"
fi

executor_health=$(docker inspect -f '{{.State.Health.Status}}' "$executor_id")
for _ in $(seq 1 40); do
  [ "$executor_health" != starting ] && break
  sleep 0.25
  executor_health=$(docker inspect -f '{{.State.Health.Status}}' "$executor_id")
done
expect "the executor container's healthcheck (listening on 7071) reports healthy" "\"$executor_health\"" 'r == "healthy"'
token=$(compose exec -T core cat /workspace/.skillbox/api-token | tr -d '\r\n')


# --- through the published gateway ----------------------------------------------------------
echo "test-compose: gateway"
body=$(curl -sS --max-time 10 "$gateway/healthz")
expect "GET /healthz on 127.0.0.1:$port: executor ok, sandbox enforced" "$body" \
  'r["executor"] == "ok" and r["sandbox"] is not None'
body=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$gateway/v1/tools")
expect "GET /v1/tools without the token is refused (401)" "$body" 'r == 401'
rtt_started=$(date +%s%N)
whoami=$(call probe:whoami '{}')
rtt_ms=$((($(date +%s%N) - rtt_started) / 1000000))
expect "a tool call through the gateway succeeds (${rtt_ms} ms round trip)" "$whoami" 'r["success"] is True'
expect "the tool runs as a per-call user (uid >= 2000000), not root" "$whoami" \
  'r["data"]["uid"] >= 2000000 and r["data"]["gid"] >= 2000000 and r["data"]["groups"] == []'
expect "the tool has no capability, no_new_privs and a seccomp filter" "$whoami" \
  'all(int(r["data"][k], 16) == 0 for k in ("CapInh","CapPrm","CapEff","CapBnd","CapAmb")) and r["data"]["NoNewPrivs"] == "1" and r["data"]["Seccomp"] == "2"'
expect "the declared secret reaches the tool from the core's env file" "$whoami" \
  "r[\"data\"][\"probe_secret\"] == \"$secret\""

# --- availability is judged where tools run ------------------------------------------------
# The core's image has no python3; the executor's has. probe needs python3 (prerequisites
# and its tools' command), so it is available because the executor's sandbox reports it.
body=$(curl -sS --max-time 10 -H "Authorization: Bearer $token" "$gateway/v1/skills")
expect "GET /v1/skills: probe (python3) is available although the core's image has no python3" "$body" \
  'any(s["name"] == "probe" and s["available"] is True for s in r["skills"])'
body=$(curl -sS --max-time 10 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"query":"probe what a tool sees: whoami, capabilities and seccomp mode"}' "$gateway/v1/route")
expect "POST /v1/route: probe's context_readiness is 1 (python3 judged in the executor's sandbox)" "$body" \
  'any(c["skill"] == "probe" and c["breakdown"]["context_readiness"] == 1.0 for c in r["candidates"])'
expect "GET /healthz: compose core image has no python3 (the check above is not vacuous)" \
  "\"$(compose exec -T core sh -c 'command -v python3 || echo none' | tr -d '\r\n')\"" 'r == "none"'

# --- the network wall -------------------------------------------------------------------
# probe declares network, so its tools run in a network namespace of the call's own whose
# only way out is the egress proxy: every address there is the namespace's own, its name
# server answers every name with an address of the namespace (198.18.0.0/15), and a
# connection to a port of the skill's hosts (or 80, 443) lands on the executor's relay,
# which takes it to the proxy by name; an address the program did not look up goes as the
# address, which the proxy refuses. From the executor container itself, outside the tool
# sandbox, the internal-only network is the second wall (timeouts, no DNS for outside names).
echo "test-compose: network"
body=$(curl -sS --max-time 10 "$gateway/healthz")
expect "GET /healthz says which network mode is in force: per-call namespaces" "$body" \
  'r["network"].startswith("namespaces:") and r["sandbox"]["sandbox"]["network_namespaces"] is True'
expect "GET /healthz: both executors watch the context folders they keep (inotify works under their seccomp policy)" "$body" \
  'r["sandbox"]["sandbox"]["watched_folders"] is True'
expect_out "the core's log says the same when the executor turned healthy" \
  'executor healthy.*network.*namespaces' compose logs --no-color core
fetch_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$fetch_id" | awk '{print $1}')
nonce="direct-$RANDOM$RANDOM"
direct_py='import http.client, sys
c = http.client.HTTPConnection(sys.argv[1], 8080, timeout=10)
c.request("GET", "/" + sys.argv[2])
print(c.getresponse().status)'
body=$(ctx_call net-wall exec_command "$(cmd_args "python3 -c '$direct_py' $fetch_ip $nonce" probe 10000)")
expect "a connection to $fetch_ip:8080 (fetchtarget's address) lands on the call's own relay, and the proxy refuses an address (403)" \
  "$body" 'r["data"]["output"].strip() == "403"'
target_log=$(fetchtarget_log 2>&1 | grep -c "$nonce" || true)
expect "fetchtarget never saw that request" "\"$target_log\"" 'r.strip() == "0"'
body=$(call probe:connect '{"host":"1.1.1.1","port":53}')
expect "a tool cannot open a TCP connection to 1.1.1.1:53 (nothing of the call listens there)" "$body" \
  'r["success"] is True and r["data"]["ok"] is False and "Connection refused" in r["data"]["error"]'
own_address='r["success"] is True and r["data"]["ok"] is True and all(a.startswith(("198.18.", "198.19.")) for a in r["data"]["addresses"])'
body=$(call probe:resolve '{"name":"example.com"}')
expect "a tool resolves example.com only to an address of its own namespace, never the real one" "$body" "$own_address"
body=$(call probe:resolve '{"name":"core"}')
expect "a tool resolves even the internal name core only to an address of its own namespace" "$body" "$own_address"

py_connect='import socket,sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print("connected")
except Exception as e:
    print("refused:", type(e).__name__, e)'
py_resolve='import socket,sys
try:
    print("resolved:", socket.getaddrinfo(sys.argv[1], None)[0][4][0])
except Exception as e:
    print("unresolved:", e)'
unreachable='^refused: (TimeoutError|OSError|ConnectionRefusedError).*(timed out|unreachable|No route)'
expect_out "the executor container cannot reach $fetch_ip:8080 (the core's external network)" \
  "$unreachable" in_executor python3 -c "$py_connect" "$fetch_ip" 8080
expect_out "the executor container cannot reach 1.1.1.1:53" \
  "$unreachable" in_executor python3 -c "$py_connect" 1.1.1.1 53
expect_out "the executor container cannot resolve example.com" \
  '^unresolved: .*(name resolution|not known)' in_executor python3 -c "$py_resolve" example.com
expect_out "the executor container cannot resolve fetchtarget (a name on the core's other network)" \
  '^unresolved: ' in_executor python3 -c "$py_resolve" fetchtarget
expect_out "the executor container resolves core (Docker DNS answers on the internal network)" \
  '^resolved: ' in_executor python3 -c "$py_resolve" core
expect_out "the executor container reaches core:7072 on the internal network" \
  '^connected$' in_executor python3 -c "$py_connect" core 7072
# What a tool's fetch gets, through the core's proxy (probe and boxed check the same).
fetched='r["success"] is True and r["data"]["ok"] is True and r["data"]["status"] == 200 and "hello from the fetch target" in r["data"]["body"]'
undeclared='r["success"] is True and r["data"]["ok"] is False and r["data"]["code"] == -32001 and "permissions.network" in r["data"]["error"]'
body=$(call probe:fetch '{"url":"http://fetchtarget:8080/hello.txt"}')
expect "the core's fetch proxy reaches the allow-listed fetchtarget:8080 for the tool" "$body" "$fetched"
body=$(call probe:fetch '{"url":"http://example.com/"}')
expect "the fetch proxy refuses a host the skill did not declare (-32001)" "$body" "$undeclared"

# --- readFile: the core's state folder and config are never readable ------------------------
# probe declares workspace.read ["**"] and ships data/tok, data/cfg and data/state, relative
# symlinks to /workspace/.skillbox/api-token, /workspace/skillbox.toml and the state folder
# (the state volume). A hard link cannot be planted here (read-only mounts on other
# devices); the unit and end-to-end tests cover hard links.
echo "test-compose: readFile"
body=$(call probe:read '{"path":"local-skills/probe/SKILL.md"}')
expect "readFile reads a workspace file the skill's glob (**) covers" "$body" \
  'r["success"] is True and r["data"]["ok"] is True and "name: probe" in r["data"]["content"]'
never_readable="r['success'] is True and r['data']['ok'] is False and r['data']['code'] == -32001 and 'never readable by skills' in r['data']['error'] and '$token' not in json.dumps(r) and '$secret' not in json.dumps(r) and 'PRIVATE KEY' not in json.dumps(r)"
for path in .skillbox/api-token .skillbox/secrets.env .skillbox/pki/skillbox-core.key \
  .skillbox/pki/ca.pem ./.skillbox/api-token .SKILLBOX/api-token skillbox.toml; do
  body=$(call probe:read "{\"path\":\"$path\"}")
  expect "readFile refuses $path to a skill declaring ** (-32001, never readable)" "$body" "$never_readable"
done
for link in tok:.skillbox/api-token cfg:skillbox.toml state/pki/skillbox-core.key:.skillbox/pki/skillbox-core.key; do
  body=$(call probe:read "{\"path\":\"local-skills/probe/data/${link%%:*}\"}")
  expect "readFile refuses the symlink local-skills/probe/data/${link%%:*} by where it leads (${link#*:})" "$body" \
    "$never_readable and 'resolves to \"${link#*:}\"' in r['data']['error']"
done

# --- the executor container ---------------------------------------------------------------
echo "test-compose: executor container"
body=$(call probe:docker_socket '{}')
expect "a tool cannot reach /var/run/docker.sock" "$body" \
  'r["success"] is True and r["data"]["ok"] is False and any(m in r["data"]["error"] for m in ("Operation not permitted", "Permission denied", "No such file"))'
expect_out "the Docker socket is not in the executor container" '^absent$' \
  in_executor bash -c 'test -e /var/run/docker.sock || test -e /run/docker.sock && echo present || echo absent'
# CHOWN DAC_OVERRIDE SETGID SETUID SETPCAP NET_BIND_SERVICE NET_ADMIN SYS_CHROOT SYS_ADMIN
# (bits 0 1 6 7 8 10 12 18 21): the set docker/README.md justifies (each taken away below).
expected_caps=00000000002415c3
executor_pid=$(in_executor bash -c 'for d in /proc/[0-9]*; do [ "$(cat "$d/comm" 2>/dev/null)" != skillbox-execut ] || echo "${d#/proc/}"; done' | head -n1)
caps=$(in_executor grep -E '^Cap(Eff|Prm|Bnd|Inh|Amb):' /proc/1/status | tr '\n\t' '  ')
expect "executor container, init (pid 1): CapEff = CapPrm = CapBnd = $expected_caps, no ambient" "\"$caps\"" \
  "all(f'{k}: $expected_caps' in r for k in ('CapEff', 'CapPrm', 'CapBnd')) and 'CapAmb: 0000000000000000' in r"
# The executor empties its own bounding set at start (nothing it starts may gain a
# capability at exec); it keeps the five in its effective and permitted sets.
caps=$(in_executor grep -E '^Cap(Eff|Prm|Bnd|Inh|Amb):' "/proc/$executor_pid/status" | tr '\n\t' '  ')
expect "executor container, skillbox-executor (pid $executor_pid): CapEff = CapPrm = $expected_caps, empty bounding set, no ambient" "\"$caps\"" \
  "all(f'{k}: $expected_caps' in r for k in ('CapEff', 'CapPrm')) and 'CapBnd: 0000000000000000' in r and 'CapAmb: 0000000000000000' in r"
# SYS_ADMIN would allow the mount API: the executor puts its own filter on itself
# (policies/seccomp/executor.json) over Docker's, so it has one filter more than init.
filters=$(in_executor bash -c "echo \$(grep -E '^Seccomp_filters:' /proc/1/status) \$(grep -E '^Seccomp_filters:' /proc/$executor_pid/status)")
expect "skillbox-executor runs under its own seccomp filter on top of Docker's (one more than init)" "\"$filters\"" \
  'len(r.split()) == 4 and int(r.split()[3]) == int(r.split()[1]) + 1'
nnp=$(in_executor bash -c "grep -E '^(NoNewPrivs|Seccomp):' /proc/1/status | tr '\n\t' '  '")
expect "executor container: no_new_privs, seccomp filter (Docker's default profile)" "\"$nnp\"" \
  '"NoNewPrivs: 1" in r and "Seccomp: 2" in r'
expect_out "executor container: the root file system is read-only (touch / fails)" \
  'Read-only file system' in_executor touch /probe-was-here
body=$(call probe:write_root '{}')
expect "a tool cannot write outside its scratch folder" "$body" \
  'r["success"] is True and r["data"]["ok"] is False and any(m in r["data"]["error"] for m in ("Read-only file system", "Permission denied"))'
env_json=$(docker inspect -f '{{json .Config.Env}}' "$executor_id")
expect "no secret in the executor container's configured environment" "$env_json" \
  "any(v.startswith('RUST_LOG=') for v in r) and not any('$secret' in v or v.startswith('PROBE_SECRET') for v in r)"
environ=$(in_executor bash -c 'for f in /proc/[0-9]*/environ; do tr "\0" "\n" <"$f" || true; done 2>/dev/null' | sort -u)
expect "no secret in the environment of any executor-container process" "$(python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().split()))' <<<"$environ")" \
  "any(v.startswith('RUST_LOG=') for v in r) and not any('$secret' in v for v in r)"
expect "the core does hold the secret (so the two checks above could see one)" \
  "$(docker inspect -f '{{json .Config.Env}}' "$core_id")" "any('$secret' in v for v in r)"
pki=$(in_executor ls -A /pki | tr '\n' ' ')
expect "the executor sees only its own key, certificate and the CA certificate" "\"$pki\"" \
  'r.split() == ["ca.pem", "skillbox-executor.key", "skillbox-executor.pem"]'
expect_out "the executor's sandbox probe passes inside the container" \
  'sandbox: +enforceable' in_executor skillbox-executor probe

# --- the core container -------------------------------------------------------------------
echo "test-compose: core container"
core_status=$(docker exec "$core_id" bash -c "grep -E '^(Uid|CapEff|NoNewPrivs):' /proc/1/status | tr '\n\t' '  '")
expect "core runs as uid 10001 with no capability and no_new_privs" "\"$core_status\"" \
  '"Uid: 10001 10001 10001 10001" in r and "CapEff: 0000000000000000" in r and "NoNewPrivs: 1" in r'
expect_out "core container: the root file system is read-only" \
  'Read-only file system' docker exec "$core_id" touch /probe-was-here
bind=$(docker inspect -f '{{json .HostConfig.PortBindings}}' "$core_id")
expect "the gateway is published on 127.0.0.1 only" "$bind" \
  'all(b["HostIp"] == "127.0.0.1" for bs in r.values() for b in bs)'

# --- jobs shaped like published skills, as shipped ------------------------------------------
echo "test-compose: published-shaped jobs"
jobs_files
jobs_node
jobs_https
if [ "$have_wheels" = yes ]; then
  jobs_deps
  jobs_quota
  jobs_restart
else
  echo "  SKIPPED dependency jobs (numpy, pillow): no wheels in $wheels and pip could not download them (see above)"
fi
expect "the executor's stop grace period (30 s) is longer than its drain (25 s)" \
  "$(docker inspect -f '{{.Config.StopTimeout}}' "$executor_id")" 'r == 30'

# --- skill add against the running deployment -----------------------------------------------
echo "test-compose: skill add against the running core"
jobs_skill_add
jobs_doc_builder

# --- each capability of the executor container, taken away ---------------------------------
# docker/README.md's table: the executor image run as compose.yaml runs it, less one
# capability, fails at what the table says that capability is for.
echo "test-compose: the executor container's capabilities, one at a time"
all_caps=(SETUID SETGID SETPCAP CHOWN DAC_OVERRIDE SYS_ADMIN NET_ADMIN NET_BIND_SERVICE SYS_CHROOT)
without() { # capability (or -) command...: the executor image as compose runs it, less one capability
  local drop=$1 args=() c
  shift
  for c in "${all_caps[@]}"; do [ "$c" = "$drop" ] || args+=(--cap-add "$c"); done
  docker run --rm --user 0:0 --cap-drop ALL "${args[@]}" --security-opt no-new-privileges:true \
    --read-only --tmpfs /tmp:size=16m,mode=1777 --tmpfs /run:size=1m,mode=0755 --network none \
    -v "$PWD/integration-tests/compose/skills:/skills:ro" --entrypoint bash "$SKILLBOX_EXECUTOR_IMAGE" -c "$*" 2>&1
}
one_call='skillbox-executor exec --skills /skills --tool probe:whoami; echo "left: $(ls -A /tmp/skillbox-scratch | grep -c ^call- || true)"'
netns='skillbox-executor probe --json 2>/dev/null'
out=$(without - "$one_call")
expect "with every capability of the table a call succeeds and leaves no scratch folder" "$(printf '%s' "$out" | as_json)" \
  '"\"success\":true" in r.replace(" ", "") and "left: 0" in r'
out=$(without - "$netns")
expect "with every capability of the table the executor makes network namespaces" "$out" 'r["network_namespaces"] is True'
expect "with every capability of the table a call's namespace takes connections around the proxy" "$out" 'r["transparent_egress"] is True'
expect "with every capability of the table a call may have a /tmp of its own (UNIX sockets)" "$out" 'r["unix_sockets"] is True'
for cap in SETUID SETGID SETPCAP CHOWN; do
  out=$(without "$cap" "$one_call")
  expect "without $cap no tool starts" "$(printf '%s' "$out" | as_json)" '"\"success\":true" not in r.replace(" ", "")'
done
out=$(without DAC_OVERRIDE "$one_call")
expect "without DAC_OVERRIDE the call's scratch folder is left behind" "$(printf '%s' "$out" | as_json)" \
  '"left: 0" not in r and "left: " in r'
for cap in SYS_ADMIN NET_ADMIN; do
  out=$(without "$cap" "$netns")
  expect "without $cap the executor cannot make network namespaces" "$out" 'r["network_namespaces"] is False'
done
out=$(without NET_BIND_SERVICE "$netns")
expect "without NET_BIND_SERVICE a call's namespace is the proxy-only one" "$out" \
  'r["network_namespaces"] is True and r["transparent_egress"] is False'
out=$(without SYS_CHROOT "$netns")
expect "without SYS_CHROOT a call cannot join a /tmp of its own: no UNIX sockets" "$out" \
  'r["network_namespaces"] is True and r["unix_sockets"] is False'

# --- execution.sandbox: container -----------------------------------------------------------
echo "test-compose: per-call containers (execution.sandbox: container)"
executor_host=$(call probe:whoami '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["hostname"])')
boxed=$(call boxed:whoami '{}')
expect "a container-sandbox call succeeds, in its own container (not the executor's)" "$boxed" \
  "r['success'] is True and r['data']['hostname'] not in ('$executor_host', '')"
expect "the call's container has no network but loopback" "$boxed" 'r["data"]["interfaces"] == ["lo"]'
expect "the call's container holds only its own skill (probe, beside it on the host, is not mounted)" "$boxed" \
  'r["data"]["own_skill_mounted"] is True and r["data"]["other_skill_mounted"] is False'
# Its user id is from its slot's range (3600000 + 32 per slot; one slot in this suite),
# never the host's (2000000+, which a host executor kills whole) nor the compose
# executor's (3000000+): before, every such container took 2000000.
expect "the tool in it still runs as a per-call user of its slot's range with no capability, no_new_privs, seccomp" "$boxed" \
  '3600000 <= r["data"]["uid"] < 3600032 and int(r["data"]["CapEff"], 16) == 0 and int(r["data"]["CapBnd"], 16) == 0 and r["data"]["NoNewPrivs"] == "1" and r["data"]["Seccomp"] == "2"'
expect "the declared secret reaches it over stdin" "$boxed" "r['data']['probe_secret'] == '$secret'"
body=$(call boxed:fetch '{"url":"http://fetchtarget:8080/hello.txt"}')
expect "its fetch is relayed over the container's stdio to the core's proxy" "$body" "$fetched"
body=$(call boxed:fetch '{"url":"http://example.com/"}')
expect "the core refuses an undeclared host for it (-32001)" "$body" "$undeclared"
expect "no per-call container is left after the calls" \
  "\"$(docker ps -aq --filter label=dev.skillbox.call --filter "label=dev.skillbox.owner=compose:$project" | tr '\n' ' ')\"" 'r.strip() == ""'
# While a call runs: what its container is, seen from the engine.
curl -sS --max-time 60 -H "Authorization: Bearer $token" -d '{"tool":"boxed:sleep","args":{"seconds":30}}' \
  "$gateway/v1/tools/call" >/dev/null 2>&1 &
caller=$!
call_container=""
for _ in $(seq 1 80); do
  call_container=$(docker ps -q --filter label=dev.skillbox.call --filter "label=dev.skillbox.owner=compose:$project" | head -n1)
  [ -n "$call_container" ] && break
  sleep 0.25
done
if [ -n "$call_container" ]; then
  spec=$(docker inspect -f '{{json .}}' "$call_container")
  expect "the call's container: network none, read-only root, no-new-privileges, the five capabilities, limits" "$spec" \
    'r["HostConfig"]["NetworkMode"] == "none" and r["HostConfig"]["ReadonlyRootfs"] is True and "no-new-privileges:true" in r["HostConfig"]["SecurityOpt"] and r["HostConfig"]["CapDrop"] == ["ALL"] and sorted(r["HostConfig"]["CapAdd"]) == ["CHOWN", "DAC_OVERRIDE", "SETGID", "SETPCAP", "SETUID"] and r["HostConfig"]["Memory"] > 0 and r["HostConfig"]["PidsLimit"] > 0 and r["HostConfig"]["NanoCpus"] > 0'
  expect "its executor takes user ids from its slot's range" "$spec" \
    'r["Config"]["Cmd"][-2:] == ["--uid-base", "3600000"]'
  expect "the call's container keeps no log (its stdout carries tokens and results)" "$spec" \
    'r["HostConfig"]["LogConfig"]["Type"] == "none"'
  expect "the secret and the capability token are not in its command line or environment" "$spec" \
    "'$secret' not in json.dumps(r['Config']['Cmd']) + json.dumps(r['Config']['Env']) + json.dumps(r['Args']) and 'capability_token' not in json.dumps(r['Config'])"
  expect "it mounts only the skill, read-only, by a bind that must exist" "$spec" \
    'all(m["Type"] == "bind" and m["RW"] is False for m in r["Mounts"]) and [m["Destination"] for m in r["Mounts"]] == ["/skills/boxed"]'
else
  fail "a running call has a container labelled dev.skillbox.call" "$(docker ps -a)"
fi
# The caller hangs up: the call's container is still removed.
kill "$caller" 2>/dev/null || true
wait "$caller" 2>/dev/null || true
gone=no
for _ in $(seq 1 240); do
  if [ -z "$(docker ps -aq --filter label=dev.skillbox.call --filter "label=dev.skillbox.owner=compose:$project")" ]; then gone=yes; break; fi
  sleep 0.25
done
expect "a caller that hangs up mid-call leaves no per-call container behind" "\"$gone\"" 'r == "yes"'
# [docker] max_containers = 1 in the suite's config: a second call while one runs is refused.
call boxed:sleep '{"seconds":4}' >"$work/first.json" &
first=$!
for _ in $(seq 1 80); do
  [ -n "$(docker ps -q --filter label=dev.skillbox.call --filter "label=dev.skillbox.owner=compose:$project")" ] && break
  sleep 0.25
done
body=$(call boxed:whoami '{}')
wait "$first"
expect "a call over [docker] max_containers is refused unavailable, saying which limit" "$body" \
  'r["success"] is False and r["error_kind"] == "unavailable" and "max_containers" in r["error"]'
expect "the call that held the slot completes" "$(cat "$work/first.json")" 'r["success"] is True and r["data"]["slept"] == 4'
# Commands under the boxed skill: a container of their own, kept while a session runs.
session_containers() {
  docker ps -aq --filter label=dev.skillbox.call --filter "label=dev.skillbox.owner=compose:$project" --filter name=skillbox-session- | tr '\n' ' '
}
put_file job-b given.txt "given to the box" >/dev/null
r=$(ctx_call job-b exec_command "$(cmd_args 'uname -n; basename "$SKILLBOX_SKILL_DIR"; cat given.txt; echo made-in-the-box > from-box.txt' boxed)")
expect "exec_command under a container skill runs in a container of its own, with only that skill, in the context's files" "$r" \
  "r['success'] is True and r['data']['exit_code'] == 0 and r['data']['output'].splitlines()[1:] == ['boxed', 'given to the box'] and r['data']['output'].splitlines()[0] not in ('$executor_host', '')"
got=$(curl -sS --max-time 30 -H "Authorization: Bearer $token" "$gateway/v1/contexts/job-b/files/from-box.txt" | as_json)
expect "a file the boxed command wrote comes back to the context" "$got" 'r == "made-in-the-box\n"'
expect "a command that ended within its yield leaves no container" "\"$(session_containers)\"" 'r.strip() == ""'
r=$(ctx_call job-b exec_command '{"skill":"boxed","cmd":"cat","yield_ms":300}')
session=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"].get("session_id", ""))' "$r" 2>/dev/null || true)
expect "a boxed command still running is a session" "$r" 'r["success"] is True and r["data"]["session_id"].startswith("sess_")'
expect "the session keeps its container while it runs" "\"$(session_containers)\"" 'len(r.split()) == 1'
r=$(ctx_call job-b write_stdin "{\"session_id\":\"$session\",\"chars\":\"into the box\\n\",\"yield_ms\":2000}")
expect "write_stdin reaches the session in its container" "$r" 'r["success"] is True and r["data"]["output"] == "into the box\n"'
r=$(ctx_call job-b close_context "{\"session_id\":\"$session\"}")
expect "close_context ends the boxed session" "$r" 'r["success"] is True and r["data"]["closed"] == 1'
gone=no
for _ in $(seq 1 80); do
  if [ -z "$(session_containers | tr -d ' ')" ]; then gone=yes; break; fi
  sleep 0.25
done
expect "the closed session's container is removed" "\"$gone\"" 'r == "yes"'
r=$(ctx_call job-b write_stdin "{\"session_id\":\"$session\",\"chars\":\"late\\n\"}")
expect "a write to the closed session is refused not_found" "$r" 'r["success"] is False and r["error_kind"] == "not_found"'
median_ms() { # tool -> median of 7 round trips in ms
  local t s
  for _ in 1 2 3 4 5 6 7; do
    s=$(date +%s%N)
    call "$1" '{}' >/dev/null
    t+=" $((($(date +%s%N) - s) / 1000000))"
  done
  python3 -c 'import statistics,sys; print(int(statistics.median(map(int, sys.argv[1:]))))' $t
}
process_ms=$(median_ms probe:whoami)
container_ms=$(median_ms boxed:whoami)
pass "round trip, median of 7: process sandbox ${process_ms} ms, per-call container ${container_ms} ms"

# --- the executor going away mid-call ------------------------------------------------------
echo "test-compose: executor lost mid-call"
wait_call_ok() { # seconds -> prints the ms until a call succeeds again, fails after seconds
  local started body
  started=$(date +%s%N)
  for _ in $(seq 1 $(($1 * 4))); do
    body=$(call probe:whoami '{}')
    if grep -q '"success":true' <<<"$body"; then
      echo $((($(date +%s%N) - started) / 1000000))
      return 0
    fi
    sleep 0.25
  done
  return 1
}
# A crash: the executor process dies (SIGKILL from inside); init exits, the container
# exits non-zero and its restart policy brings it back.
call probe:sleep '{"seconds":5}' >"$work/crash.json" &
sleep 1.5
in_executor bash -c 'for d in /proc/[0-9]*; do [ "$(cat "$d/comm" 2>/dev/null)" != skillbox-execut ] || kill -KILL "${d#/proc/}"; done' || true
wait
expect "executor crash mid-call: the caller gets unavailable" "$(cat "$work/crash.json")" \
  'r["success"] is False and r["error_kind"] == "unavailable"'
if back_ms=$(wait_call_ok 60); then
  pass "executor crash: the restart policy brings it back; the next call succeeds after ${back_ms} ms"
else
  fail "executor crash: the executor is back within 60 s" "$(docker inspect -f '{{.State.Status}} restarts={{.RestartCount}}' "$executor_id")"
fi
# An operator's `docker kill`: Docker counts it as a manual stop and its restart policy
# leaves the container down; the core's supervisor starts it again.
call probe:sleep '{"seconds":5}' >"$work/kill.json" &
sleep 1.5
docker kill "$executor_id" >/dev/null
wait
expect "docker kill mid-call: the caller gets unavailable" "$(cat "$work/kill.json")" \
  'r["success"] is False and r["error_kind"] == "unavailable"'
if back_ms=$(wait_call_ok 60); then
  pass "docker kill: the supervisor starts the executor again; the next call succeeds after ${back_ms} ms"
else
  fail "docker kill: the supervisor brings the executor back within 60 s" "$(docker inspect -f '{{.State.Status}}' "$executor_id"; curl -sS "$gateway/healthz")"
fi
for _ in $(seq 1 40); do  # /healthz reports the last health round (1 s apart here)
  curl -sS --max-time 5 "$gateway/healthz" | grep -q '"executor":"ok"' && break
  sleep 0.25
done
expect "docker kill: /healthz shows the supervisor's start of the killed executor" "$(curl -sS --max-time 10 "$gateway/healthz")" \
  'r["supervisor"]["restarts"] >= 1 and "exited with code 137" in r["supervisor"]["last_action"] and r["executor"] == "ok"'

# A hung executor: the process is stopped (SIGSTOP), the container runs on. Health
# questions time out, calls skip it, and after [docker] restart_after_ms the supervisor
# restarts the container.
restarts_before=$(curl -sS --max-time 10 "$gateway/healthz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["supervisor"]["restarts"])')
in_executor bash -c 'for d in /proc/[0-9]*; do [ "$(cat "$d/comm" 2>/dev/null)" != skillbox-execut ] || kill -STOP "${d#/proc/}"; done'
hung_started=$(date +%s%N)
sleep 5
expect "hung executor: /healthz reports it down while it does not answer" "$(curl -sS --max-time 10 "$gateway/healthz")" \
  'r["executor"] == "down" and any(not e["healthy"] for e in r["executors"])'
if back_ms=$(wait_call_ok 60); then
  back_ms=$((($(date +%s%N) - hung_started) / 1000000))
  pass "hung executor: the supervisor restarts it; calls succeed again ${back_ms} ms after it hung"
else
  fail "hung executor: restarted within 60 s" "$(curl -sS "$gateway/healthz")"
fi
expect "hung executor: the supervisor says it restarted the executor that stopped answering" "$(curl -sS --max-time 10 "$gateway/healthz")" \
  "r['supervisor']['restarts'] > $restarts_before and 'had not answered health' in r['supervisor']['last_action']"

# An operator's `docker stop` (a clean stop, exit 0 or 143) is respected: the supervisor
# leaves the executor down until it is started again.
docker stop -t 5 "$executor_id" >/dev/null
sleep 4   # four supervisor rounds
expect "docker stop: the supervisor leaves a cleanly stopped executor down" \
  "\"$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$executor_id")\"" 'r.split()[0] == "exited" and r.split()[1] in ("0", "143")'
docker start "$executor_id" >/dev/null
if back_ms=$(wait_call_ok 60); then
  pass "docker start: calls succeed again (${back_ms} ms)"
else
  fail "docker start: the executor is back within 60 s" "$(curl -sS "$gateway/healthz")"
fi

# --- scaled out: two executors -------------------------------------------------------------
echo "test-compose: --scale executor=2"
compose up -d --no-recreate --scale executor=2 >"$work/scale.log" 2>&1 || cat "$work/scale.log" >&2
healthy=0
for _ in $(seq 1 120); do
  healthy=$(curl -sS --max-time 5 "$gateway/healthz" | python3 -c 'import json,sys; print(sum(e["healthy"] for e in json.load(sys.stdin)["executors"]))' 2>/dev/null || echo 0)
  [ "$healthy" -ge 2 ] && break
  sleep 0.25
done
expect "scale: the core finds both executors through the service name" "$healthy" 'r == 2'
hosts=()
for _ in 1 2 3 4 5 6; do
  hosts+=("$(call probe:whoami '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["hostname"])' 2>/dev/null || echo failed)")
done
expect "scale: six calls are spread over both executors (round robin)" \
  "$(printf '%s\n' "${hosts[@]}" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().split()))')" \
  'len(set(r)) == 2 and "failed" not in r and all(r.count(h) >= 2 for h in set(r))'

# --- a context's files and shell, with two executors ----------------------------------------
# form-filler is shaped like a published skill (SKILL.md and a script, no tools). The files
# live in the core's volume and travel with each call, so consecutive calls landing on
# either executor see the last call's output; a session stays on the executor holding it.
echo "test-compose: a context's files and shell"
expect "PUT a file into a context" "$(put_file job-c fields.json '{"name": "Ada"}')" 'r["size"] == 15'
put_file job-c form.txt 'Name: {{name}}' >/dev/null
r=$(ctx_call job-c run_skill_script '{"name":"form-filler","script":"fill_form.py","args":["fields.json","form.txt","filled.txt"]}')
expect "run_skill_script runs a published-shaped script on uploaded files" "$r" \
  'r["success"] is True and [f["path"] for f in r["files"]] == ["filled.txt"]'
got=$(curl -sS --max-time 30 -H "Authorization: Bearer $token" "$gateway/v1/contexts/job-c/files/filled.txt" | as_json)
expect "the bot downloads the file the script wrote" "$got" 'r == "Name: Ada"'
for i in 1 2 3 4; do
  ctx_call job-c exec_command "{\"cmd\":\"echo $i \$(uname -n) >> steps.txt\"}" >/dev/null
done
r=$(ctx_call job-c exec_command '{"cmd":"cat steps.txt"}')
expect "four steps on two executors each see the step before (files travel with the calls)" "$r" \
  '[l.split()[0] for l in r["data"]["output"].split("\n") if l] == ["1","2","3","4"] and len({l.split()[1] for l in r["data"]["output"].split("\n") if l}) == 2'
r=$(ctx_call job-c exec_command '{"cmd":"cat","yield_ms":200}')
session=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"].get("session_id",""))' "$r" 2>/dev/null || true)
outs=()
for i in 1 2 3 4; do
  outs+=("$(ctx_call job-c write_stdin "{\"session_id\":\"$session\",\"chars\":\"line$i\\n\",\"yield_ms\":1000}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["output"].strip())' 2>/dev/null || echo failed)")
done
expect "a session's writes reach the executor that holds it, four times of four" \
  "$(printf '%s\n' "${outs[@]}" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().split()))')" \
  'r == ["line1", "line2", "line3", "line4"]'
r=$(ctx_call job-c close_context '{}')
expect "close_context ends the session" "$r" 'r["data"]["closed"] == 1'
# A file of 3 MiB comes to the executors over a file stream (1 MiB and up), written into
# the call's folder as it arrives; a second file of the same content is copied from it.
head -c 3145728 /dev/urandom >"$work/big.bin"
big_sha=$(sha256sum "$work/big.bin" | cut -d' ' -f1)
for name in big.bin copy.bin; do
  curl -sS --max-time 60 -X PUT --data-binary @"$work/big.bin" \
    -H "Authorization: Bearer $token" "$gateway/v1/contexts/job-big/files/data/$name" >/dev/null
done
for i in 1 2; do
  r=$(ctx_call job-big exec_command '{"cmd":"sha256sum data/big.bin data/copy.bin"}')
  expect "a 3 MiB context file and its copy reach the call whole, call $i of 2" "$r" \
    "[l.split()[0] for l in r['data']['output'].split('\\n') if l] == ['$big_sha', '$big_sha']"
done

# --- network for skills' programs, two executors -------------------------------------------
# form-filler is granted fetchtarget and PROBE_SECRET bound to it (the suite's config). As
# shipped the executors make a network namespace per network call: its programs reach the
# granted host through the egress proxy, whichever executor runs the call.
echo "test-compose: egress on two executors"
jobs_secret
# thumbnail on both executors: the second one joined with an empty slot of the scratch
# volume, and the core built the environment there from the lock before offering it.
if [ "$have_wheels" = yes ]; then
  slots=""
  for _ in $(seq 1 120); do
    r=$(ctx_call job-d run_skill_script "${thumb_args/thumb.png/thumb3.png}")
    slot=$(python3 -c 'import json,re,sys; m=re.search(r"skillbox-executor/(\d+)/\.deps", json.loads(sys.argv[1])["data"]["stdout"]); print(m.group(1) if m else "")' "$r" 2>/dev/null || true)
    [ -n "$slot" ] && slots=$(printf '%s\n%s' "$slots" "$slot" | sort -u | grep . | tr '\n' ' ')
    [ "$(wc -w <<<"$slots")" -ge 2 ] && break
    sleep 1
  done
  expect "thumbnail runs on both executors: the one that joined got its environment from the lock, no operator step (slots: $slots)" \
    "\"$slots\"" 'len(r.split()) == 2'
fi
jobs_direct

# --- extending the executor image ----------------------------------------------------------
# docker/README.md's way: SKILLBOX_EXTRA_DEBIAN_PACKAGES for docker/build.sh (the build
# argument EXTRA_DEBIAN_PACKAGES), never an edit of the shipped files. LibreOffice, headless
# Chromium and a JDK, as an operator adds them for the office, web-app testing and Java
# skills, then runs the gallery's skills in that image as compose runs the executor (its
# capabilities, read-only root, no network).
# (Built in the background since the start: extra_build.)
echo "test-compose: extending the executor image (EXTRA_DEBIAN_PACKAGES=$extra_packages)"
wait "$extra_build" 2>/dev/null || true
extra_build=""
if [ "$(cat "$work/extra.rc" 2>/dev/null)" = 0 ]; then
  out=$(docker run --rm --entrypoint bash "$extra_executor" -c 'jq --version; python3 -m pip --version; node --version; npm --version; git --version; curl --version | head -n1' 2>&1)
  expect "the image built with EXTRA_DEBIAN_PACKAGES has jq beside python3-pip, node, npm, git and curl (built in $(cat "$work/extra.secs") s, beside the suite)" \
    "$(printf '%s' "$out" | as_json)" \
    'r.startswith("jq-") and "pip " in r and r.count("\n") >= 5 and "git version" in r and "curl " in r'
  caps=()
  for c in "${all_caps[@]}"; do caps+=(--cap-add "$c"); done
  gallery() { # SKILL:TOOL: a call of the gallery's skill in that image, as compose runs the executor
    docker run --rm --user 0:0 --cap-drop ALL "${caps[@]}" --security-opt no-new-privileges:true \
      --read-only --tmpfs /tmp:size=16m,mode=1777 --tmpfs /run:size=1m,mode=0755 --network none \
      --tmpfs /var/lib/skillbox-executor:size=512m,exec,mode=0755 \
      -v "$PWD/integration-tests/gallery:/gallery:ro" --entrypoint skillbox-executor "$extra_executor" \
      exec --skills /gallery --scratch-root /var/lib/skillbox-executor --tool "$1" 2>/dev/null || echo '{}'
  }
  expect "gallery office: LibreOffice in the executor container as compose runs it (UNIX sockets, a /tmp of the call's own) recalculates a workbook and converts a letter to PDF" \
    "$(gallery office:convert)" 'r["success"] is True and json.loads(r["data"]["stdout"])["csv"]["head"] == "19,23,438\n" and json.loads(r["data"]["stdout"])["pdf"]["head"].startswith("%PDF-")'
  expect "gallery media: a 200 MiB file written and read back whole" \
    "$(gallery media:roundtrip)" 'r["success"] is True and json.loads(r["data"]["stdout"]) == {"size": 200 * 1024 * 1024, "same": True}'
  expect "gallery node-report: a Node script builds its report under the default 256 MiB" \
    "$(gallery node-report:build)" 'r["success"] is True and json.loads(r["data"]["stdout"])["rows"] == 20000'
  expect "gallery node-report: a Node script allocating past 256 MiB is stopped as resource_limit" \
    "$(gallery node-report:hog)" 'r["success"] is False and r["error_kind"] == "resource_limit" and "memory limit of 256 MiB" in r["error"]'
  expect "gallery jvm-report: a Java program run from its source builds its report under the default 256 MiB" \
    "$(gallery jvm-report:build)" 'r["success"] is True and json.loads(r["data"]["stdout"])["rows"] == 20000'
  expect "gallery jvm-report: a Java program allocating past 256 MiB is stopped as resource_limit" \
    "$(gallery jvm-report:hog)" 'r["success"] is False and r["error_kind"] == "resource_limit" and "memory limit of 256 MiB" in r["error"]'
  expect "gallery webapp: headless Chromium checks the app its script serves on the call's own loopback (the page's script ran, its button clicked twice)" \
    "$(gallery webapp:check)" 'r["success"] is True and json.loads(r["data"]["stdout"]) | {"port": 0} == {"port": 0, "rendered": True, "static_left": False, "clicks": "2"}'
else
  fail "docker/build.sh with SKILLBOX_EXTRA_DEBIAN_PACKAGES=$extra_packages builds" "$(tail -n 20 "$work/extra.log")"
fi

# --- teardown is checked by the EXIT trap ----------------------------------------------------
echo "test-compose: up to ready ${ready_ms:-?} ms (healthy ${up_ms} ms), tool round trip ${rtt_ms} ms, process ${process_ms:-?} ms vs container ${container_ms:-?} ms (median), suite $(($(date +%s) - suite_started)) s"
echo "compose: $passed passed, $failures failed"
[ "$failures" = 0 ]
