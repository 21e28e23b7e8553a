# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # token, gateway, work come from the sourcing suite; it reads have_wheels, wheels
# Sourced by docker/test-compose.sh and docker/test-swarm.sh: jobs shaped like published
# skills, run against whichever deployment the sourcing suite brought up, and the fixtures
# they need. One copy of each check; what differs between the deployments is a hook.
#
#   jobs_fixtures     # the suite's CA and httpstarget's certificate, the wheels index, the
#                     # greeter repository, a probe secret (sets the SKILLBOX_TEST_* paths,
#                     # secret, have_wheels)
#   jobs_files        # files in and out; a script one command makes executable, a later one runs
#   jobs_node         # Node under a skill's envelope
#   jobs_https        # Python to a granted HTTPS host through the egress proxy (the suite's
#                     # CA), refused (403) elsewhere
#   jobs_secret       # a bound secret: a placeholder in the sandbox, the value at the target
#   jobs_direct       # programs that ignore the proxy (http.client, Node fetch, a Go
#                     # binary) reach the granted host, refused (403) elsewhere
#   jobs_deps         # thumbnail (numpy, pillow from the suite's index) built on load, runs
#   jobs_quota        # a context at its quota beside the built environment
#   jobs_restart      # the executor restarted as an operator does; thumbnail runs again
#   jobs_skill_add    # `skill add` / `skill remove` from the git server, against the running core
#   jobs_doc_builder  # a Node skill's npm package built from the suite's registry, then used
#
# The sourcing suite defines pass NAME and fail NAME [DETAIL], sets token and gateway once
# the deployment answers, work (its temporary folder), and these hooks:
#   in_executor CMD...         run CMD in an executor container
#   core_cli CMD...            run CMD in the core's container (the operator's CLI)
#   restart_executor           restart the executor as an operator would (and check its own
#                              figures); jobs_restart then checks what comes back
#   fetchtarget_log            print fetchtarget's log (its requests)
#   jobs_ping                  a tool whose call succeeds while an executor answers
# The skills are the compose suite's form-filler and thumbnail (integration-tests/compose/
# skills), with the grants of the suite's skillbox.toml: form-filler may reach
# http://fetchtarget:8080 (PROBE_SECRET bound to it) and https://httpstarget:8443.

jobs_ping=${jobs_ping:-probe:whoami}

# --- helpers --------------------------------------------------------------------------------
call() { # tool args-json -> the result of docs/http-api.md
  curl -sS --max-time 60 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "{\"tool\":\"$1\",\"args\":$2}" "$gateway/v1/tools/call" || echo '{"curl_failed": true}'
}
expect() { # name json expr: passes when the python expression over r is true
  local name=$1 body=$2 expr=$3
  if python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if ($expr) else 1)" "$body" 2>/dev/null; then
    pass "$name"
  else
    fail "$name" "$body"
  fi
}
ctx_call() { # context tool args-json
  curl -sS --max-time 120 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "{\"tool\":\"$2\",\"context_id\":\"$1\",\"args\":$3}" "$gateway/v1/tools/call" || echo '{"curl_failed": true}'
}
put_file() { # context path text
  printf '%s' "$3" | curl -sS --max-time 30 -X PUT --data-binary @- \
    -H "Authorization: Bearer $token" "$gateway/v1/contexts/$1/files/$2"
}
as_json() { python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))'; }
cmd_args() { # cmd [skill (or "") [yield_ms]] -> exec_command's arguments as JSON
  python3 -c 'import json,sys; a={"cmd": sys.argv[1]}; a.update({"skill": sys.argv[2]} if len(sys.argv) > 2 and sys.argv[2] else {}); a.update({"yield_ms": int(sys.argv[3])} if len(sys.argv) > 3 else {}); print(json.dumps(a))' "$@"
}
expect_out() { # name regex command...: passes when the output matches the regex
  local name=$1 re=$2 out
  shift 2
  out=$("$@" 2>&1) || true
  if grep -Eq "$re" <<<"$out"; then pass "$name"; else fail "$name" "$out"; fi
}

# --- fixtures -------------------------------------------------------------------------------
jobs_fixtures() {
  secret="probe-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
  printf 'PROBE_SECRET=%s\n' "$secret" >"$work/secrets.env"
  # httpstarget's certificate, from a CA of this run's own (the core trusts it through
  # [egress] extra_roots; the suite's deployment file gives the core ca.pem).
  local tls=$work/tls
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=skillbox compose suite CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=httpstarget" -keyout "$tls/server.key" \
    -out "$tls/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=DNS:httpstarget\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$tls/ext"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -days 2 -extfile "$tls/ext" -out "$tls/server.pem" >/dev/null 2>&1
  rm -f "$tls/ca.key" "$tls/server.csr" "$tls/ext"
  chmod 0755 "$tls"; chmod 0644 "$tls"/*
  export SKILLBOX_TEST_TLS=$tls
  # thumbnail's numpy and pillow: wheels for the executor image's python3 (3.11), downloaded
  # once into target/compose-wheels (pip's ordinary client, PIP_INDEX_URL if set), served as
  # a PEP 503 index by name (pyindex). Without them the dependency jobs are SKIPPED by name.
  wheels=target/compose-wheels
  if ! ls "$wheels"/numpy-*.whl "$wheels"/pillow-*.whl >/dev/null 2>&1; then
    mkdir -p "$wheels"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --python-version 3.11 --implementation cp --abi cp311 \
      --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
      -d "$wheels" numpy==1.26.4 pillow==10.4.0 >"$work/wheels.log" 2>&1 || cat "$work/wheels.log" >&2
  fi
  python3 - "$wheels" "$work/pyindex" <<'PY'
import hashlib, os, re, shutil, sys
src, out = sys.argv[1:]
os.makedirs(os.path.join(out, "files"))
projects = {}
for f in sorted(os.listdir(src)) if os.path.isdir(src) else []:
    if not f.endswith(".whl"):
        continue
    shutil.copy(os.path.join(src, f), os.path.join(out, "files", f))
    with open(os.path.join(src, f), "rb") as w:
        sha = hashlib.sha256(w.read()).hexdigest()
    projects.setdefault(re.sub(r"[-_.]+", "-", f.split("-")[0]).lower(), []).append((f, sha))
os.makedirs(os.path.join(out, "simple"))
with open(os.path.join(out, "simple", "index.html"), "w") as idx:
    idx.write("".join(f'<a href="{n}/">{n}</a>\n' for n in projects))
for name, files in projects.items():
    os.makedirs(os.path.join(out, "simple", name))
    with open(os.path.join(out, "simple", name, "index.html"), "w") as page:
        page.write("".join(f'<a href="../../files/{f}#sha256={h}">{f}</a>\n' for f, h in files))
PY
  # An npm registry beside the index, on the same server (static files): the document of
  # the gallery's doc-builder's package skbdoc (integration-tests/packages/skbdoc) at
  # /npm/skbdoc, its tarball at /npm/tarballs/ ([deps] npm_registry of the suite's config).
  python3 - integration-tests/packages/skbdoc "$work/pyindex/npm" <<'PY'
import base64, hashlib, io, json, os, sys, tarfile
src, out = sys.argv[1:]
version = "1.2.0"
manifest = json.dumps({"name": "skbdoc", "version": version, "main": "index.js"}).encode()
raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.USTAR_FORMAT) as tar:
    for name, data in [("package.json", manifest), ("index.js", open(os.path.join(src, "index.js"), "rb").read())]:
        info = tarfile.TarInfo("package/" + name)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
tgz = raw.getvalue()
os.makedirs(os.path.join(out, "tarballs"))
with open(os.path.join(out, "tarballs", f"skbdoc-{version}.tgz"), "wb") as f:
    f.write(tgz)
integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
doc = {"name": "skbdoc", "dist-tags": {"latest": version}, "versions": {version: {
    "name": "skbdoc", "version": version, "main": "index.js",
    "dist": {"tarball": f"http://pyindex:8080/npm/tarballs/skbdoc-{version}.tgz", "integrity": integrity}}}}
with open(os.path.join(out, "skbdoc"), "w") as f:
    json.dump(doc, f)
PY
  chmod -R a+rX "$work/pyindex"
  export SKILLBOX_TEST_PYINDEX=$work/pyindex
  # greeter, a published-shaped skill (SKILL.md and a script) in a git repository the
  # gitserver service serves (`git http-backend`, as this user: git serves only repositories
  # its user owns), for `skill add` against the running core.
  SKILLBOX_TEST_UID=$(id -u)
  SKILLBOX_TEST_GID=$(id -g)
  export SKILLBOX_TEST_UID SKILLBOX_TEST_GID
  local gitsrc=$work/greeter-src
  mkdir -p "$gitsrc/scripts" "$work/gitsrv"
  printf -- '---\nname: greeter\ndescription: Greet someone by name, from a script.\n---\n# Greeter\n\nRun `python3 {baseDir}/scripts/greet.py NAME`.\n' >"$gitsrc/SKILL.md"
  printf 'import sys\nprint("hello " + " ".join(sys.argv[1:]))\n' >"$gitsrc/scripts/greet.py"
  git -C "$gitsrc" init -q -b main
  git -C "$gitsrc" add -A
  git -C "$gitsrc" -c user.name=suite -c user.email=suite@skillbox.invalid commit -q -m "greeter 1"
  git clone -q --bare "$gitsrc" "$work/gitsrv/greeter.git"
  # The gallery's doc-builder (a SKILL.md, a package.json, a Node script), published the
  # same way.
  local docsrc=$work/doc-builder-src
  cp -r integration-tests/gallery/doc-builder "$docsrc"
  git -C "$docsrc" init -q -b main
  git -C "$docsrc" add -A
  git -C "$docsrc" -c user.name=suite -c user.email=suite@skillbox.invalid commit -q -m "doc-builder 1"
  git clone -q --bare "$docsrc" "$work/gitsrv/doc-builder.git"
  chmod -R a+rX "$work/gitsrv"
  export SKILLBOX_TEST_GITSRV=$work/gitsrv
  have_wheels=no
  ls "$work"/pyindex/files/numpy-*.whl "$work"/pyindex/files/pillow-*.whl >/dev/null 2>&1 && have_wheels=yes
  return 0
}

# --- files and scripts ----------------------------------------------------------------------
# Files in and out, and a script one command makes executable and a later one runs: the
# scratch allows exec, and the context keeps the file's exec bit.
jobs_files() {
  local make_script r got
  make_script='printf "#!/bin/sh\necho ran \$1\n" > run.sh && chmod +x run.sh && ./run.sh first'
  r=$(ctx_call job-x exec_command "$(cmd_args "$make_script")")
  expect "a script made executable by a command runs in it (the scratch allows exec)" "$r" \
    'r["data"]["exit_code"] == 0 and r["data"]["output"].strip() == "ran first"'
  r=$(ctx_call job-x exec_command "$(cmd_args './run.sh second')")
  expect "the script runs in a later command (the context keeps its exec bit)" "$r" \
    'r["data"]["exit_code"] == 0 and r["data"]["output"].strip() == "ran second"'
  got=$(curl -sS --max-time 30 -H "Authorization: Bearer $token" "$gateway/v1/contexts/job-x/files/run.sh" | as_json)
  expect "the bot downloads the script the command wrote" "$got" 'r.startswith("#!/bin/sh")'
}

# Node starts under a skill's envelope (the default 256 MiB). The bot waits up to 10 s for
# it to end (the default yield, 1 s, would answer a slow start as a running session).
jobs_node() {
  local r
  r=$(ctx_call job-x exec_command "$(cmd_args 'node -e "console.log(process.version, 6 * 7)"' form-filler 10000)")
  expect "node starts under a skill's envelope" "$r" \
    'r["data"]["exit_code"] == 0 and r["data"]["output"].strip().endswith(" 42")'
}

# --- network through the egress proxy --------------------------------------------------------
# Python reaching a granted HTTPS host through the egress proxy, and refused elsewhere.
jobs_https() {
  local https_py host r
  https_py='import urllib.request as u, sys
try:
    print(u.urlopen(sys.argv[1], timeout=10).read().decode().strip())
except Exception as e:
    print("refused:", type(e).__name__, e)'
  for host in https://httpstarget:8443/hello.txt https://example.com/ https://pyindex:8080/simple/; do
    r=$(ctx_call job-h exec_command "$(cmd_args "python3 -c '$https_py' $host" form-filler)")
    if [ "$host" = https://httpstarget:8443/hello.txt ]; then
      expect "a skill's Python reaches its granted HTTPS host through the proxy (the suite's CA in its bundle)" "$r" \
        'r["data"]["exit_code"] == 0 and r["data"]["output"].strip() == "hello from the fetch target"'
    else
      expect "a skill's Python is refused $host, which it was not granted" "$r" \
        '"refused:" in r["data"]["output"] and "403" in r["data"]["output"]'
    fi
  done
}

# form-filler is granted fetchtarget and PROBE_SECRET bound to it: its Python reaches the
# host through the egress proxy (twice: whichever executor runs the call), the sandbox sees
# a placeholder, and the proxy puts the value in on the way to the bound host only.
jobs_secret() {
  local egress_py i r target_log
  egress_py='import os, urllib.request as u; print(u.urlopen("http://fetchtarget:8080/hello.txt?k=" + os.environ.get("PROBE_SECRET", "none")).read().decode().strip())'
  for i in 1 2; do
    r=$(ctx_call job-e exec_command "$(cmd_args "python3 -c '$egress_py'" form-filler)")
    expect "a published-shaped skill's Python reaches its granted host through the egress proxy ($i of 2)" "$r" \
      'r["data"]["exit_code"] == 0 and r["data"]["output"].strip() == "hello from the fetch target"'
  done
  r=$(ctx_call job-e exec_command '{"skill":"form-filler","cmd":"printenv PROBE_SECRET"}')
  expect "the bound secret is a placeholder in the sandbox" "$r" \
    'r["data"]["output"].startswith("skillbox-secret:") and "'"$secret"'" not in r["data"]["output"]'
  target_log=$(fetchtarget_log 2>&1 | grep 'hello.txt?k=' || true)
  expect "fetchtarget got the real secret in the query, never the placeholder" "$(printf '%s' "$target_log" | as_json)" \
    '"k='"$secret"'" in r and "skillbox-secret" not in r'
}

jobs_direct() {
  local r
  # The shipped executor has CAP_NET_BIND_SERVICE, so a call's namespace takes the
  # connections of programs that ignore HTTP_PROXY (its name server answers, its listeners
  # carry them to the egress proxy; docs/sandbox.md): the same hosts, the same refusals.
  put_file job-n direct.py 'import http.client, sys
c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=10)
c.request("GET", sys.argv[3])
r = c.getresponse()
print(r.status, r.read().decode().strip())' >/dev/null
  put_file job-n direct.mjs 'const r = await fetch(process.argv[2]); console.log(r.status, (await r.text()).trim());' >/dev/null
  r=$(ctx_call job-n exec_command "$(cmd_args 'python3 direct.py fetchtarget 8080 /hello.txt' form-filler 10000)")
  expect "a program that ignores the proxy (http.client) reaches its granted host" "$r" \
    'r["data"]["exit_code"] == 0 and r["data"]["output"].strip() == "200 hello from the fetch target"'
  r=$(ctx_call job-n exec_command "$(cmd_args 'node direct.mjs http://fetchtarget:8080/hello.txt' form-filler 10000)")
  expect "Node's fetch, which ignores the proxy variables, reaches the granted host" "$r" \
    'r["data"]["exit_code"] == 0 and r["data"]["output"].strip() == "200 hello from the fetch target"'
  r=$(ctx_call job-n exec_command "$(cmd_args 'python3 direct.py example.com 80 /' form-filler 10000)")
  expect "a program that ignores the proxy is refused a host it was not granted (403)" "$r" \
    'r["data"]["output"].startswith("403")'
  jobs_direct_go
}

# A Go program built with no proxy support (its Transport has no Proxy), static, put in the
# context as a user's upload: it reaches the granted host and is refused elsewhere.
jobs_direct_go() {
  local src=$work/direct-go r
  if ! command -v go >/dev/null; then
    echo "SKIPPED a Go binary without proxy support: no go toolchain on this machine"
    return
  fi
  mkdir -p "$src"
  cat >"$src/main.go" <<'GO'
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

func main() {
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	r, err := client.Get(os.Args[1])
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	body, _ := io.ReadAll(r.Body)
	fmt.Println(r.StatusCode, strings.TrimSpace(string(body)))
}
GO
  if ! (cd "$src" && CGO_ENABLED=0 GO111MODULE=off GOCACHE="$src/cache" HOME="$src" go build -o direct-go main.go) >"$src/build.log" 2>&1; then
    fail "the Go program without proxy support builds" "$(tail -n 5 "$src/build.log")"
    return
  fi
  curl -sS --max-time 30 -X PUT --data-binary @"$src/direct-go" -H "Authorization: Bearer $token" \
    "$gateway/v1/contexts/job-n/files/direct-go" >/dev/null
  r=$(ctx_call job-n exec_command "$(cmd_args 'chmod +x direct-go && ./direct-go http://fetchtarget:8080/hello.txt' form-filler 10000)")
  expect "a Go binary without proxy support reaches the granted host" "$r" \
    'r["data"]["exit_code"] == 0 and r["data"]["output"].strip() == "200 hello from the fetch target"'
  r=$(ctx_call job-n exec_command "$(cmd_args './direct-go http://example.com/' form-filler 10000)")
  expect "a Go binary without proxy support is refused a host it was not granted (403)" "$r" \
    'r["data"]["output"].startswith("403")'
}

# --- dependencies ---------------------------------------------------------------------------
# A skill needing numpy and pillow, from the suite's index: built on load, no operator step.
skill_ready() { # name seconds -> the skill's entry once it is available (else its last)
  local entry=""
  for _ in $(seq 1 $(($2 * 2))); do
    entry=$(curl -sS --max-time 5 -H "Authorization: Bearer $token" "$gateway/v1/skills" |
      python3 -c 'import json,sys; print(json.dumps([s for s in json.load(sys.stdin)["skills"] if s["name"] == sys.argv[1]][0]))' "$1" 2>/dev/null || echo '{}')
    grep -q '"available": true' <<<"$entry" && break
    sleep 0.5
  done
  echo "$entry"
}
thumbnail_ready() { skill_ready thumbnail "$1"; }
thumb_ok='r["success"] is True and any(f["path"] == "thumb.png" for f in r["files"]) and "numpy" in json.dumps(r) and ".deps" in json.dumps(r)'
thumb_args='{"name":"thumbnail","script":"thumbnail.py","args":["thumb.png","64"]}'

jobs_deps() {
  local entry r
  entry=$(thumbnail_ready 240)
  expect "thumbnail (numpy, pillow) is available once its environment is built on load" "$entry" 'r["available"] is True'
  r=$(ctx_call job-d run_skill_script "$thumb_args")
  expect "thumbnail's script imports numpy and pillow from its environment and writes the PNG" "$r" "$thumb_ok"
}

# A context at its quota (256 MiB: four files of 63 MiB) beside the built environment and
# the file cache: the scratch volume holds them all.
jobs_quota() {
  local i listed r want
  for i in 1 2 3 4; do
    head -c $((63 * 1024 * 1024)) /dev/urandom >"$work/big$i"
    [ "$i" = 1 ] && want=$(sha256sum "$work/big1" | cut -c1-64)
    curl -sS --max-time 120 -X PUT --data-binary @"$work/big$i" -H "Authorization: Bearer $token" \
      "$gateway/v1/contexts/job-q/files/big$i.bin" >/dev/null
    rm -f "$work/big$i"
  done
  listed=$(curl -sS --max-time 30 -H "Authorization: Bearer $token" "$gateway/v1/contexts/job-q/files")
  expect "a context holds 4 x 63 MiB, at its 256 MiB quota" "$listed" \
    'sum(f["size"] for f in r["files"]) == 4 * 63 * 1024 * 1024'
  r=$(ctx_call job-q run_skill_script "$thumb_args")
  expect "thumbnail runs in the context at its quota, beside its environment (no ENOSPC)" "$r" "$thumb_ok"
  # Up to 10 s for the command to end (hashing 63 MiB may outlast the default 1 s yield).
  # The files come to the executor's container as raw bytes on a stream of the channel.
  r=$(ctx_call job-q exec_command "$(cmd_args 'sha256sum big1.bin | cut -c1-64; ls | wc -l' '' 10000)")
  expect "the context's four large files are laid out for a command beside the PNG, whole" "$r" \
    "r[\"data\"][\"exit_code\"] == 0 and r[\"data\"][\"output\"].split() == [\"$want\", \"5\"]"
}

# The executor restarted the way an operator restarts it there (restart_executor), and the
# skill runs again with no operator step (its environment is kept in the executor's slot
# of the scratch volume, or built from the lock where an executor took a new slot).
jobs_restart() {
  local back entry r
  restart_executor
  back=no
  for _ in $(seq 1 240); do  # the core's next health rounds see the new process
    grep -q '"success":true' <<<"$(call "$jobs_ping" '{}')" && { back=yes; break; }
    sleep 0.25
  done
  expect "after the restart calls succeed again" "\"$back\"" 'r == "yes"'
  entry=$(thumbnail_ready 120)
  expect "after the restart thumbnail is available again with no operator step" "$entry" 'r["available"] is True'
  r=$(ctx_call job-d run_skill_script "${thumb_args/thumb.png/thumb2.png}")
  expect "after the restart thumbnail's script runs with numpy and pillow" "$r" "${thumb_ok/thumb.png/thumb2.png}"
  expect_out "the restarted executor kept the environment it built (in its slot of the scratch volume)" \
    '^[0-9a-f]{64}$' in_executor ls /var/lib/skillbox-executor/0/.deps
}

# --- skill add against the running deployment -----------------------------------------------
# The operator runs the CLI in the core's container: it finds the running core there and
# sends the add to it (POST /v1/skills/install); the core fetches with its git, installs
# into the `skills` volume (written by the core alone) and reloads; the executor serves it.
jobs_skill_add() {
  local out skills r
  out=$(core_cli skillbox skill add http://gitserver:8080/greeter.git --json 2>&1 || true)
  expect "skill add in the core's container goes through the running core and installs from the git server" \
    "$out" 'r["ok"] is True and r["reload"] == "ok" and [i["name"] for i in r["added"]["installed"]] == ["greeter"]'
  skills=$(curl -sS --max-time 10 -H "Authorization: Bearer $token" "$gateway/v1/skills")
  expect "the added skill is listed available with no restart" "$skills" \
    'any(s["name"] == "greeter" and s["available"] is True for s in r["skills"])'
  r=$(ctx_call job-g run_skill_script '{"name":"greeter","script":"greet.py","args":["Ada"]}')
  expect "the executor runs the added skill's script" "$r" 'r["success"] is True and "hello Ada" in r["data"]["stdout"]'
  expect_out "the executor cannot write the core's skills folder (read-only there)" \
    'Read-only file system' in_executor touch /skills/planted
  out=$(core_cli skillbox skill remove greeter --json 2>&1 || true)
  expect "skill remove through the running core removes it and reloads" "$out" \
    'r["removed"]["name"] == "greeter" and "reloaded" in r["reload"]'
  skills=$(curl -sS --max-time 10 -H "Authorization: Bearer $token" "$gateway/v1/skills")
  expect "the removed skill is gone from the list" "$skills" 'not any(s["name"] == "greeter" for s in r["skills"])'
}

# --- a Node skill's npm package ---------------------------------------------------------------
# The gallery's doc-builder, published-shaped (a SKILL.md and a package.json asking for
# skbdoc), added from the git server: the executor builds its package with npm through the
# egress proxy from the suite's registry ([deps] npm_registry), then its Node script builds
# a letter with it in a context, as an agent runs it, and the letter comes back as a file.
jobs_doc_builder() {
  local out entry r
  out=$(core_cli skillbox skill add http://gitserver:8080/doc-builder.git --json 2>&1 || true)
  expect "skill add of the gallery's doc-builder (a package.json) installs it from the git server" \
    "$out" 'r["ok"] is True and [i["name"] for i in r["added"]["installed"]] == ["doc-builder"]'
  entry=$(skill_ready doc-builder 180)
  expect "doc-builder is available once npm built its package from the registry (npm in the shipped executor image)" \
    "$entry" 'r["available"] is True'
  r=$(ctx_call job-n run_skill_script '{"name":"doc-builder","script":"build.js","args":["Dear reader & friends"]}')
  expect "doc-builder's Node script builds a letter with its npm package, and the letter is a file of the context" "$r" \
    'r["success"] is True and json.loads(r["data"]["stdout"])["builder"] == "1.2.0" and any(f["path"] == "letter.fodt" for f in r["files"])'
  r=$(curl -sS --max-time 10 -H "Authorization: Bearer $token" "$gateway/v1/contexts/job-n/files/letter.fodt")
  expect "the letter holds the text, escaped" "$(printf '%s' "$r" | as_json)" '"<text:p>Dear reader &amp; friends</text:p>" in r'
  core_cli skillbox skill remove doc-builder --json >/dev/null 2>&1 || true
}
