#!/usr/bin/env python3
"""A PEP 503 package index on 127.0.0.1 for the dependency tests, with wheels it builds
itself (a wheel is a zip with metadata). Prints its port, then serves until killed.

    pyindex.py ROOT SPEC_JSON [RATE]

SPEC_JSON: [{"name", "version", "kind": "wheel"|"sdist"|"offsite"|"split", "pad_mb"}, ...].
A wheel holds module `name` whose VALUE is its version (and, with "pad_mb", a file of that
many MiB of random bytes, stored: a big wheel that does not compress); "sdist" offers only a source archive;
"offsite" links its wheel on another host (files.other.test), which a build must not reach;
"split" links its wheel on files.split.test at this server's port (PyPI's layout: pages on
one host, files on another), which a build reaches when `[deps] file_hosts` names it.

The server counts the GETs of each path; `GET /_counts` answers them as JSON. RATE, when
given, is the most bytes per second a file is sent at (a download from a remote index).

With PYINDEX_TLS=CERT_PEM:KEY_PEM in the environment the index speaks HTTPS with that
certificate (PyPI's scheme; "split" links are https too), and a second, plain listener
answers `/_counts` (and the same files) for the test: the server prints both ports on its
first line, the HTTPS one first.
"""
import base64
import hashlib
import http.server
import io
import json
import os
import ssl
import sys
import tarfile
import threading
import time
import zipfile


def wheel_bytes(name, version, pad_mb=0):
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VALUE = {version!r}\n",
        **({f"{name}/pad.bin": os.urandom(pad_mb << 20)} if pad_mb else {}),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: skillbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        data = text if isinstance(text, bytes) else text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return out.getvalue()


def sdist_bytes(name, version):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as t:
        data = b"from setuptools import setup\nsetup(name=%r, version=%r)\n" % (name.encode(), version.encode())
        info = tarfile.TarInfo(f"{name}-{version}/setup.py")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return out.getvalue()


class Handler(http.server.SimpleHTTPRequestHandler):
    """Files of the folder, each GET counted, sent at most at RATE bytes per second."""

    counts = {}
    lock = threading.Lock()
    rate = 0

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/_counts":
            with Handler.lock:
                body = json.dumps(Handler.counts).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        with Handler.lock:
            Handler.counts[path] = Handler.counts.get(path, 0) + 1
        super().do_GET()

    def copyfile(self, source, outputfile):
        if not Handler.rate:
            return super().copyfile(source, outputfile)
        start, sent = time.monotonic(), 0
        while True:
            data = source.read(64 * 1024)
            if not data:
                return
            outputfile.write(data)
            sent += len(data)
            ahead = sent / Handler.rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)


def main():
    root, spec = sys.argv[1], json.loads(sys.argv[2])
    Handler.rate = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    os.makedirs(f"{root}/files", exist_ok=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    tls = os.environ.get("PYINDEX_TLS")
    scheme, plain = "http", None
    if tls:
        cert, key = tls.split(":", 1)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
        plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    links = {}
    for p in spec:
        name, version, kind = p["name"], p["version"], p.get("kind", "wheel")
        if kind == "sdist":
            file, data = f"{name}-{version}.tar.gz", sdist_bytes(name, version)
        else:
            file = f"{name}-{version}-py3-none-any.whl"
            data = wheel_bytes(name, version, p.get("pad_mb", 0))
        with open(f"{root}/files/{file}", "wb") as f:
            f.write(data)
        sha = hashlib.sha256(data).hexdigest()
        base = {
            "offsite": "http://files.other.test:9/files",
            "split": f"{scheme}://files.split.test:{port}/files",
        }.get(kind, "/files")
        links.setdefault(name, []).append(f'<a href="{base}/{file}#sha256={sha}">{file}</a>')
    for name, items in links.items():
        os.makedirs(f"{root}/simple/{name}", exist_ok=True)
        with open(f"{root}/simple/{name}/index.html", "w") as f:
            f.write("<html><body>\n" + "<br>\n".join(items) + "\n</body></html>\n")
    # Gone with the test process that started it.
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    os.chdir(root)
    if plain:
        threading.Thread(target=plain.serve_forever, daemon=True).start()
        print(port, plain.server_address[1], flush=True)
    else:
        print(port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
