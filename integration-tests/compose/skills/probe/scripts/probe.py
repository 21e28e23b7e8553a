"""probe: the compose suite's test tool (jsonrpc stdio protocol).

Each tool answers {"ok": true, ...} or {"ok": false, "error": "..."}, so the suite sees
the exact refusal."""
import json
import os
import socket
import sys
import time


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def status_fields(*names):
    with open("/proc/self/status") as f:
        lines = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    return {n: lines.get(n, "").strip() for n in names}


def attempt(fn):
    try:
        return {"ok": True, **fn()}
    except Exception as e:  # the refusal is the result
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def connect(host, port):
    with socket.create_connection((host, port), timeout=3):
        return {"connected": f"{host}:{port}"}


def resolve(name):
    return {"addresses": sorted({a[4][0] for a in socket.getaddrinfo(name, None)})}


def docker_socket():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect("/var/run/docker.sock")
    return {"connected": "/var/run/docker.sock"}


def write_root():
    with open("/probe-was-here", "w") as f:
        f.write("x")
    return {"written": "/probe-was-here"}


def capability(method, params):
    send({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    reply = json.loads(sys.stdin.readline())
    if "error" in reply:
        return {"ok": False, "code": reply["error"]["code"], "error": reply["error"]["message"]}
    return {"ok": True, **reply["result"]}


def fetch(url):
    return capability("fetch", {"url": url})


def read(path):
    return capability("readFile", {"path": path})


request = json.loads(sys.stdin.readline())
tool = request["params"]["tool"]
args = request["params"]["args"]
if tool == "whoami":
    result = {
        "hostname": socket.gethostname(),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        **status_fields("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"),
        "env_names": sorted(os.environ),
        "probe_secret": os.environ.get("PROBE_SECRET"),
    }
elif tool == "connect":
    result = attempt(lambda: connect(args["host"], args["port"]))
elif tool == "resolve":
    result = attempt(lambda: resolve(args["name"]))
elif tool == "docker_socket":
    result = attempt(docker_socket)
elif tool == "write_root":
    result = attempt(write_root)
elif tool == "fetch":
    result = fetch(args["url"])
elif tool == "read":
    result = read(args["path"])
elif tool == "sleep":
    time.sleep(args["seconds"])
    result = {"slept": args["seconds"]}
else:
    send({"jsonrpc": "2.0", "id": 0, "error": {"code": -32601, "message": "unknown tool " + tool}})
    sys.exit(0)
send({"jsonrpc": "2.0", "id": 0, "result": result})
