"""Bots calling skillbox throughout the Swarm suite (docker/test-swarm.sh).

    python3 clients.py GATEWAY TOKEN OUT_JSONL STOP_FILE [CLIENTS]

CLIENTS threads (default 8) call until STOP_FILE exists, alternating the read tool
`ledger:balance` and the write tool `ledger:append` (a fresh nonce per call), each with a
short random sleep inside the tool, so calls are in flight whenever an executor stops.
Every call is one line of OUT_JSONL: client, tool, nonce, answered (an HTTP answer carrying
a tool result came back), success, error_kind, error, host (the executor's container),
uid (the tool's user id).
"""
import json
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request

gateway, token, out_path, stop_file = sys.argv[1:5]
clients = int(sys.argv[5]) if len(sys.argv) > 5 else 8
lock = threading.Lock()
out = open(out_path, "w", encoding="utf-8")


def call(tool, args):
    body = json.dumps({"tool": tool, "args": args}).encode()
    req = urllib.request.Request(
        f"{gateway}/v1/tools/call",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=90) as resp:
            return json.loads(resp.read()), None
    except urllib.error.HTTPError as e:
        return None, f"HTTP {e.code}: {e.read()[:300]!r}"
    except Exception as e:  # the gateway did not answer: a lost call
        return None, f"{type(e).__name__}: {e}"


def client(n):
    seq = 0
    rng = random.Random(n)
    while not os.path.exists(stop_file):
        seq += 1
        ms = rng.randint(0, 400)
        if seq % 2:
            tool, args, nonce = "ledger:balance", {"ms": ms}, None
        else:
            nonce = f"c{n}-{seq}-{rng.randrange(1 << 30):x}"
            tool, args = "ledger:append", {"nonce": nonce, "ms": ms}
        started = time.monotonic()
        result, failure = call(tool, args)
        line = {
            "client": n,
            "seq": seq,
            "tool": tool,
            "nonce": nonce,
            "answered": result is not None and "success" in result,
            "success": bool(result and result.get("success")),
            "error_kind": (result or {}).get("error_kind"),
            "error": (result or {}).get("error") or failure,
            "host": ((result or {}).get("data") or {}).get("host"),
            "uid": ((result or {}).get("data") or {}).get("uid"),
            "ms": int((time.monotonic() - started) * 1000),
            "at": time.time(),
        }
        with lock:
            out.write(json.dumps(line) + "\n")
            out.flush()


threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out.close()
