"""Judges a Swarm suite run (docker/test-swarm.sh): the clients' calls and the recorder's log.

    python3 check.py CALLS_JSONL RECORDER_LOG [KILL_START KILL_END]

Prints one `ok` / `FAIL` line per rule and a summary line; exits 1 when a rule failed.
Rules: every call was answered (none lost); every answer is a success or a clean
`unavailable`; no nonce was recorded twice (no write tool ran twice); every successful
`ledger:append` was recorded exactly once; nothing was recorded that no client sent; and,
given the window in which the only executor was killed (epoch seconds), no `unavailable`
answer came outside it: scale-downs and the rolling update failed no call.
"""
import collections
import json
import sys

calls = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
recorded = [line for line in open(sys.argv[2], encoding="utf-8").read().splitlines() if line]
failures = 0


def rule(ok, what, detail=""):
    global failures
    if ok:
        print(f"  ok    {what}")
    else:
        failures += 1
        print(f"  FAIL  {what}\n        {detail}"[:2000], file=sys.stderr)


kinds = collections.Counter("success" if c["success"] else (c["error_kind"] or "lost") for c in calls)
lost = [c for c in calls if not c["answered"]]
unclean = [c for c in calls if c["answered"] and not c["success"] and c["error_kind"] != "unavailable"]
counts = collections.Counter(recorded)
twice = {n: k for n, k in counts.items() if k > 1}
appends = [c for c in calls if c["tool"] == "ledger:append"]
sent = {c["nonce"] for c in appends}
succeeded = [c["nonce"] for c in appends if c["success"]]
missing = [n for n in succeeded if counts.get(n, 0) != 1]
strangers = [n for n in counts if n not in sent]
hosts = {c["host"] for c in calls if c["host"]}
uids = sorted({c["uid"] for c in calls if c.get("uid") is not None})

rule(len(calls) > 0, f"{len(calls)} calls made by the clients")
rule(not lost, f"none lost: {len(calls) - len(lost)} of {len(calls)} calls answered", lost[:3])
rule(not unclean, f"every answer is a success or a clean unavailable ({dict(kinds)})", unclean[:3])
rule(not twice, f"no write tool ran twice: {len(counts)} nonces recorded, none twice", twice)
rule(not missing, f"each of the {len(succeeded)} successful ledger:append calls recorded exactly once", missing[:5])
rule(not strangers, "nothing recorded that no client sent", strangers[:5])
# deploy/swarm/stack.yaml: --uid-base 3000000, 32 ids per executor.
rule(bool(uids) and all(3_000_000 <= u < 3_000_032 for u in uids),
     f"tools ran under the stack's own user ids ({uids[:1]}..{uids[-1:]})", uids)
if len(sys.argv) > 4:
    kill_start, kill_end = float(sys.argv[3]), float(sys.argv[4])
    outside = [c for c in calls if c["error_kind"] == "unavailable"
               and (c["at"] < kill_start or c["at"] - c["ms"] / 1000 > kill_end)]
    inside = kinds["unavailable"] - len(outside)
    rule(not outside, f"no call failed outside the {kill_end - kill_start:.1f} s without an executor "
         f"(kill to replacement): scale-downs and the roll failed none; {inside} unavailable inside it", outside[:3])
unavailable_appends = sum(1 for c in appends if c["error_kind"] == "unavailable")
ran_anyway = sum(1 for c in appends if c["error_kind"] == "unavailable" and counts.get(c["nonce"]))
print(
    f"summary: calls={len(calls)} success={kinds['success']} unavailable={kinds['unavailable']} "
    f"appends={len(appends)} recorded={len(recorded)} unavailable_appends={unavailable_appends} "
    f"(of which ran once before the answer was lost: {ran_anyway}) executors_seen={len(hosts)}"
)
sys.exit(1 if failures else 0)
