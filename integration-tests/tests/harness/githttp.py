#!/usr/bin/env python3
"""A git server on 127.0.0.1 for the "getting skills" tests: every request runs
`git http-backend` (git's own smart HTTP server, as a CGI program) over the bare
repositories under ROOT. Prints its port, then serves until killed.

    githttp.py ROOT [HOST PORT]

HOST and PORT (default 127.0.0.1 and any free port): the compose suite serves it on its
network as the `gitserver` service.
"""
import http.server
import os
import subprocess
import sys

ROOT = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.cgi()

    def do_POST(self):
        self.cgi()

    def cgi(self):
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": ROOT,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "REMOTE_ADDR": "127.0.0.1",
        }
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True
        ).stdout
        sep = out.find(b"\r\n\r\n")
        head, payload = (out[:sep], out[sep + 4 :]) if sep >= 0 else out.split(b"\n\n", 1)
        status = 200
        headers = []
        for line in head.replace(b"\r\n", b"\n").split(b"\n"):
            name, _, value = line.decode().partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


HOST = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 0
server = http.server.ThreadingHTTPServer((HOST, PORT), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
