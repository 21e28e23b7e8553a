"""The Swarm suite's recorder: appends the body of every POST /record to a log (one line
each) and serves the log on GET /log. Duplicate lines are a write tool that ran twice."""
import http.server
import threading

LOCK = threading.Lock()
LOG = []


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        with LOCK:
            LOG.append(body)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def do_GET(self):
        with LOCK:
            data = ("\n".join(LOG) + "\n").encode() if LOG else b""
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
