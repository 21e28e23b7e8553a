"""Closed-loop load for docker/bench-swarm.sh: CLIENTS threads, each with one keep-alive
connection to the gateway, call TOOL back to back; the first WARMUP seconds are not
counted, then SECONDS are. Prints one JSON line: calls, failures, calls_per_s, p50_ms,
p90_ms.

    python3 load.py HOST:PORT TOKEN TOOL CLIENTS WARMUP SECONDS
"""
import http.client
import json
import statistics
import sys
import threading
import time

addr, token, tool = sys.argv[1:4]
clients, warmup, seconds = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
host, port = addr.rsplit(":", 1)
body = json.dumps({"tool": tool, "args": {}})
headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
start = time.monotonic()
count_from, stop_at = start + warmup, start + warmup + seconds
lock = threading.Lock()
latencies, failures = [], []


def client():
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    mine, bad = [], []
    while True:
        t0 = time.monotonic()
        if t0 >= stop_at:
            break
        try:
            conn.request("POST", "/v1/tools/call", body, headers)
            answer = json.loads(conn.getresponse().read())
            ok = answer.get("success") is True
        except Exception as e:  # counted, and a fresh connection
            ok, answer = False, str(e)
            conn.close()
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
        t1 = time.monotonic()
        if t0 >= count_from and t1 <= stop_at:
            (mine if ok else bad).append((t1 - t0) * 1000 if ok else answer)
    with lock:
        latencies.extend(mine)
        failures.extend(bad)


threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
lat = sorted(latencies)
print(json.dumps({
    "calls": len(lat),
    "failures": len(failures),
    "first_failure": str(failures[0])[:200] if failures else None,
    "calls_per_s": round(len(lat) / seconds, 1),
    "p50_ms": round(statistics.median(lat), 2) if lat else None,
    "p90_ms": round(lat[int(len(lat) * 0.9) - 1], 2) if lat else None,
}))
