"""Helpers shared by the console scripts: the bot's REST calls (bearer token), run in the
background while a browser decides their approvals, and polling."""

import json
import threading
import time
import urllib.error
import urllib.request


class Bot:
    """A bot talking to the gateway with the API token."""

    def __init__(self, base, token):
        self.base = base.rstrip("/")
        self.token = token

    def request(self, method, path, body=None, headers=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def json(self, method, path, body=None, headers=None):
        status, _, text = self.request(method, path, body, headers)
        assert status == 200, f"{method} {path}: {status} {text}"
        return json.loads(text)

    def call(self, tool, args, headers=None):
        return self.json("POST", "/v1/tools/call", {"tool": tool, "args": args}, headers)

    def call_in_background(self, tool, args):
        """Starts the call on a thread; `.result()` waits for its answer."""
        box = {}

        def run():
            try:
                box["result"] = self.call(tool, args)
            except Exception as e:  # surfaced by result()
                box["error"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()

        class Pending:
            def done(self):
                return not t.is_alive()

            def result(self, timeout=90):
                t.join(timeout)
                assert not t.is_alive(), f"{tool} did not answer within {timeout} s"
                if "error" in box:
                    raise box["error"]
                return box["result"]

        return Pending()

    def approvals(self, status=None):
        path = "/v1/approvals" + (f"?status={status}" if status else "")
        return self.json("GET", path)["approvals"]

    def wait_pending(self, skill, tool, known=(), timeout=30):
        """The first pending approval of skill:tool whose id is not in `known`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for a in self.approvals("pending"):
                if a["skill"] == skill and a["tool"] == tool and a["id"] not in known:
                    return a
            time.sleep(0.05)
        raise AssertionError(f"no pending approval of {skill}:{tool} within {timeout} s")

    def decide(self, approval_id, decision, reason=None):
        body = {"decision": decision}
        if reason:
            body["reason"] = reason
        return self.json("POST", f"/v1/approvals/{approval_id}", body)
