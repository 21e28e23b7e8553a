"""echo tool: reads one JSON-RPC `tool.invoke` request and answers with its arguments."""
import json
import sys

request = json.loads(sys.stdin.readline())
params = request["params"]
reply = {"jsonrpc": "2.0", "id": request["id"], "result": {"echo": params["args"]}}
sys.stdout.write(json.dumps(reply) + "\n")
sys.stdout.flush()
