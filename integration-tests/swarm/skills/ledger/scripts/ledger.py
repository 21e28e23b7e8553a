"""ledger: the Swarm suite's test tools (jsonrpc protocol of docs/skill-format.md)."""
import json
import os
import socket
import sys
import time


def capability(method, params):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) + "\n")
    sys.stdout.flush()
    return json.loads(sys.stdin.readline())


request = json.loads(sys.stdin.readline())
tool = request["params"]["tool"]
args = request["params"]["args"]
time.sleep(args.get("ms", 0) / 1000)
if tool == "balance":
    result = {"balance": 42, "host": socket.gethostname(), "uid": os.getuid()}
else:
    reply = capability("fetch", {"url": "http://recorder:8080/record", "method": "POST", "body": args["nonce"]})
    if "error" in reply or reply.get("result", {}).get("status") != 200:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": 0, "error": {"code": 1, "message": f"recorder: {reply}"}}) + "\n")
        sys.exit(0)
    result = {"recorded": args["nonce"], "host": socket.gethostname(), "uid": os.getuid()}
sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": 0, "result": result}) + "\n")
