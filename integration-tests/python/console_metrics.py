"""GET /metrics parsed with prometheus-client's OpenMetrics parser (asked for by Accept)
and its Prometheus text-format parser (without Accept): the counters move by exactly the
calls, routes and fetches made; every known outcome is there at 0 before it happens; the
gauges follow pending approvals and the executor's health under a stable name.

Usage: console_metrics.py BASE TOKEN ALLOWED_URL PRIVATE_URL
"""

import sys
import time

from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as prometheus_families

from console_common import Bot

BASE, TOKEN, ALLOWED, PRIVATE = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3], sys.argv[4]
bot = Bot(BASE, TOKEN)


# What Prometheus sends: OpenMetrics first, the 0.0.4 text as a fallback.
OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"


def scrape(openmetrics=True):
    headers = {"Accept": OPENMETRICS} if openmetrics else {}
    status, answered, text = bot.request("GET", "/metrics", headers=headers)
    assert status == 200, (status, text)
    content_type = answered["Content-Type"]
    if openmetrics:
        assert content_type.startswith("application/openmetrics-text"), answered
        families = text_string_to_metric_families(text)
    else:
        assert content_type.startswith("text/plain; version=0.0.4"), answered
        assert "# EOF" not in text, text
        families = prometheus_families(text)
    samples = {}
    for family in families:
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def has(samples, name, **labels):
    """Whether a sample of `name` carries all of `labels` (whatever other labels it has)."""
    return any(
        n == name and all(dict(l).get(k) == v for k, v in labels.items()) for (n, l) in samples
    )


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def delta(before, after, name, **labels):
    return value(after, name, **labels) - value(before, name, **labels)


# The token is required.
status, _, text = Bot(BASE, "wrong").request("GET", "/metrics")
assert status == 401, (status, text)

before = scrape()
# Every outcome is there at 0 before it happens, for each tool of the catalogue.
for outcome in ("success", "approval_denied", "resource_limit", "tool_error"):
    assert has(before, "skillbox_tool_calls_total", skill="signer", tool="sign", outcome=outcome), outcome
for outcome in ("selected", "no_skill", "error"):
    assert has(before, "skillbox_routes_total", outcome=outcome), outcome
for outcome in ("ok", "permission_denied", "timeout", "too_many_redirects"):
    assert has(before, "skillbox_fetch_requests_total", outcome=outcome), outcome
for outcome in ("approved", "denied", "expired"):
    assert has(before, "skillbox_approval_decision_seconds_count", outcome=outcome), outcome
# A call that waits out the approval timeout (120 s) still lands in a finite bucket.
les = [
    float(dict(labels)["le"])
    for (name, labels) in before
    if name == "skillbox_tool_call_duration_seconds_bucket" and dict(labels).get("skill") == "echo"
]
assert max(le for le in les if le != float("inf")) > 120, sorted(les)
# Without Accept, the Prometheus text format, with the same series.
plain = scrape(openmetrics=False)
assert has(plain, "skillbox_tool_calls_total", skill="signer", tool="sign", outcome="approval_denied")
assert value(plain, "skillbox_approvals_pending") == 0
for i in range(3):
    assert bot.call("echo:echo", {"text": f"hi {i}"})["success"] is True
for _ in range(2):
    r = bot.call("echo:echo", {"wrong": 1})
    assert r["error_kind"] == "invalid_args", r
r = bot.call("echo:nope", {})
assert r["error_kind"] == "not_found", r
for q in ("echo this back", "count the words"):
    bot.json("POST", "/v1/route", {"query": q})
assert bot.call("net:fetch", {"url": ALLOWED})["success"] is True
denied = bot.call("net:fetch", {"url": PRIVATE})
after = scrape()

calls = "skillbox_tool_calls_total"
assert delta(before, after, calls, skill="echo", tool="echo", outcome="success", bot="operator") == 3
assert delta(before, after, calls, skill="echo", tool="echo", outcome="invalid_args", bot="operator") == 2
# Label values come from the catalogue: a made-up tool is "(unknown)".
assert delta(before, after, calls, skill="echo", tool="(unknown)", outcome="not_found", bot="operator") == 1
duration = "skillbox_tool_call_duration_seconds_count"
assert delta(before, after, duration, skill="echo", tool="echo") == 5
# Only the calls that started a tool process report a spawn time (two fetches included).
assert delta(before, after, "skillbox_executor_spawn_seconds_count") == 5, after
# Every REST call's gateway and pipeline stages; the channel's and the executor's for the
# 7 calls an executor answered (3 echoes, 2 refused by the argument schema, 2 fetches).
stages = "skillbox_call_stage_seconds_count"
for s in ("gateway", "pipeline"):
    assert delta(before, after, stages, stage=s) == 8, (s, after)
for s in ("channel", "executor_queue", "executor_start", "tool", "executor_end"):
    assert delta(before, after, stages, stage=s) == 7, (s, after)
routes = sum(
    delta(before, after, "skillbox_routes_total", outcome=o) for o in ("selected", "no_skill", "error")
)
assert routes == 2, routes
assert delta(before, after, "skillbox_route_latency_seconds_count") == 2
assert delta(before, after, "skillbox_fetch_requests_total", outcome="ok") == 1
assert delta(before, after, "skillbox_fetch_requests_total", outcome="permission_denied") == 1, denied
healthy = [(dict(l), v) for (n, l), v in after.items() if n == "skillbox_executor_healthy"]
# The executor `up` starts listens on a port picked at each start: labelled by a stable name.
assert healthy == [({"executor": "local-0"}, 1.0)], healthy
assert value(after, "skillbox_disabled_skills") == 0

# The pending gauge follows an approval; its decision lands in the histogram.
assert value(after, "skillbox_approvals_pending") == 0
call = bot.call_in_background("signer:write_note", {"text": "metrics"})
pending = bot.wait_pending("signer", "write_note")
waiting = scrape()
assert value(waiting, "skillbox_approvals_pending") == 1
bot.decide(pending["id"], "deny", "metrics test")
assert call.result()["error_kind"] == "approval_denied"
done = scrape()
assert value(done, "skillbox_approvals_pending") == 0
decisions = "skillbox_approval_decision_seconds_count"
assert delta(waiting, done, decisions, outcome="denied") == 1
assert delta(waiting, done, calls, skill="signer", tool="write_note", outcome="approval_denied", bot="operator") == 1
print("metrics checks passed")
