"""Writes 200 MiB to a file in the scratch folder (as a video render or a big download
does), reads it back whole and prints its size and SHA-256 beside the written one."""
import hashlib
import json
import os

path = os.path.join(os.environ["TMPDIR"], "render.bin")
block = bytes(range(256)) * 4096  # 1 MiB
written = hashlib.sha256()
with open(path, "wb") as f:
    for i in range(200):
        chunk = block[i:] + block[:i]
        written.update(chunk)
        f.write(chunk)
read = hashlib.sha256()
with open(path, "rb") as f:
    while chunk := f.read(1 << 20):
        read.update(chunk)
print(json.dumps({"size": os.path.getsize(path), "same": read.digest() == written.digest()}))
