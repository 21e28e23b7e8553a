"""Serves the skill's app on the call's own loopback, loads it in headless Chromium and
prints what the rendered page shows, as web-app testing skills do with their server and
browser helpers."""

import json
import os
import socket
import subprocess
import sys
import time

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "app")
# The browser and its flags in the tool sandbox (docs/sandbox.md, "Headless Chromium"):
# its own sandbox off (ours holds it), no zygote, the GPU thread in the browser, shared
# memory in TMPDIR.
BROWSER = [
    "chromium-headless-shell", "--no-sandbox", "--no-zygote", "--in-process-gpu",
    "--disable-gpu", "--disable-dev-shm-usage",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"the app's server did not listen on 127.0.0.1:{port}")


def main():
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", APP],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(port)
        dom = subprocess.run(
            BROWSER + ["--dump-dom", f"http://127.0.0.1:{port}/"],
            capture_output=True, text=True, timeout=45,
        ).stdout
    finally:
        server.kill()
    print(json.dumps({
        "port": port,
        "rendered": "rendered by script 42" in dom,
        "static_left": "static text" in dom,
        "clicks": dom.split('<span id="count">', 1)[-1].split("<", 1)[0] if "count" in dom else None,
    }))


main()
