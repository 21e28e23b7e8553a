#!/usr/bin/env python3
"""A PEP 503 package index on 127.0.0.1 for the dependency tests, with wheels it builds
itself (a wheel is a zip with metadata). Prints its port, then serves until killed.

    pyindex.py ROOT SPEC_JSON

SPEC_JSON: [{"name", "version", "kind": "wheel"|"sdist"|"offsite"|"split"}, ...]. A wheel
holds module `name` whose VALUE is its version; "sdist" offers only a source archive;
"offsite" links its wheel on another host (files.other.test), which a build must not reach;
"split" links its wheel on files.split.test at this server's port (PyPI's layout: pages on
one host, files on another), which a build reaches when `[deps] file_hosts` names it.
"""
import base64
import hashlib
import http.server
import io
import json
import os
import sys
import tarfile
import threading
import time
import zipfile


def wheel_bytes(name, version):
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VALUE = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: skillbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
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


def main():
    root, spec = sys.argv[1], json.loads(sys.argv[2])
    os.makedirs(f"{root}/files", exist_ok=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    port = server.server_address[1]
    links = {}
    for p in spec:
        name, version, kind = p["name"], p["version"], p.get("kind", "wheel")
        if kind == "sdist":
            file, data = f"{name}-{version}.tar.gz", sdist_bytes(name, version)
        else:
            file, data = f"{name}-{version}-py3-none-any.whl", wheel_bytes(name, version)
        with open(f"{root}/files/{file}", "wb") as f:
            f.write(data)
        sha = hashlib.sha256(data).hexdigest()
        base = {
            "offsite": "http://files.other.test:9/files",
            "split": f"http://files.split.test:{port}/files",
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
    print(port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
