"""boxed: the compose suite's tool for `execution.sandbox: container` (jsonrpc stdio)."""
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


def interfaces():
    with open("/proc/net/dev") as f:
        return sorted(line.split(":")[0].strip() for line in f.readlines()[2:])


request = json.loads(sys.stdin.readline())
tool = request["params"]["tool"]
if tool == "whoami":
    # The tool's Landlock rules keep it from listing /skills, but a path lookup still
    # tells whether another skill is mounted in this container at all.
    result = {
        "own_skill_mounted": os.path.exists("/skills/boxed/skill.yaml"),
        "other_skill_mounted": os.path.exists("/skills/probe/skill.yaml"),
        "hostname": socket.gethostname(),
        "uid": os.getuid(),
        "interfaces": interfaces(),
        "probe_secret": os.environ.get("PROBE_SECRET"),
        **status_fields("CapEff", "CapBnd", "NoNewPrivs", "Seccomp"),
    }
elif tool == "fetch":
    send({"jsonrpc": "2.0", "id": 1, "method": "fetch", "params": {"url": request["params"]["args"]["url"]}})
    reply = json.loads(sys.stdin.readline())
    if "error" in reply:
        result = {"ok": False, "code": reply["error"]["code"], "error": reply["error"]["message"]}
    else:
        result = {"ok": True, **reply["result"]}
elif tool == "sleep":
    time.sleep(request["params"]["args"]["seconds"])
    result = {"slept": request["params"]["args"]["seconds"]}
else:
    send({"jsonrpc": "2.0", "id": 0, "error": {"code": -32601, "message": "unknown tool " + tool}})
    sys.exit(0)
send({"jsonrpc": "2.0", "id": 0, "result": result})
