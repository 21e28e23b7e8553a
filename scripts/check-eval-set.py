#!/usr/bin/env python3
"""Checks the paraphrase routing set (core/tests/data/routing_paraphrases.jsonl): every
labelled request must share no content word with its skill's name and description.

    python3 scripts/check-eval-set.py [SET] [CORPUS]

SET defaults to core/tests/data/routing_paraphrases.jsonl, CORPUS to $SKILLBOX_CORPUS,
else ../shared/corpus beside the repository (skill folders holding SKILL.md, any depth).
One JSON object a line: {"query": ..., "skill": NAME or null, "lang": "en" | "zh"}.

Words: Latin runs of letters and digits, lowercased, with a light stemmer (plural -s/-es,
-ed, -ing, -ies/-y and a trailing -e are folded, so "notes" meets "note" and "flows"
"flow"); English stop words dropped. Chinese: each CJK character that is not a function
character, and each bigram of adjacent CJK characters. A Latin word in a Chinese request
counts as well. A skill named in two folders (skill-creator) is checked against both
descriptions. Also reports: labels that are not corpus skills, a "lang" that disagrees
with the text (zh: any CJK character), duplicate requests, and the counts (en, zh, none,
skills covered). Exits 1 on any violation.
"""
import collections
import glob
import json
import os
import re
import sys

STOP = set("""
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing don down during each etc few for
from further get got had has have having he her here hers him his how i if in into is it its
itself just let like make me more most my myself need no nor not now of off on once only or
other our ours out over own please same she should so some such than that the their them then
there these they this those through to too under until up use used using very via want was we
were what when where which while who whom why will with would you your yours yourself one two
any every new also may might must shall us it's i'm don't can't won't
""".split())

# Chinese function characters (particles, pronouns, light verbs): not content.
ZH_STOP = set("的了吗呢吧啊呀嘛么着过把被给在是有和与或我你他她它们这那个一也都就还要会能想请帮下上中里不没很太又再并及之其以于对从到让用去来做")


def is_cjk(c):
    o = ord(c)
    return 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x3040 <= o <= 0x30FF


def stem(w):
    for suf, rep in (("ies", "y"), ("sses", "ss"), ("es", ""), ("s", ""), ("ing", ""), ("ed", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: len(w) - len(suf)] + rep
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def words(text):
    out = set()
    for w in re.findall(r"[A-Za-z0-9]+", text):
        w = w.lower()
        if w in STOP or len(w) < 2:
            continue
        out.add(stem(w))
    runs = re.findall(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]+", text)
    for run in runs:
        for c in run:
            if c not in ZH_STOP:
                out.add(c)
        for a, b in zip(run, run[1:]):
            if a not in ZH_STOP or b not in ZH_STOP:
                out.add(a + b)
    return out


def frontmatter(path):
    text = open(path, encoding="utf-8").read()
    m = re.match(r"---\n(.*?)\n---", text, re.S)
    fm = m.group(1) if m else ""
    name = re.search(r"^name:\s*(.*)$", fm, re.M)
    desc = re.search(r"^description:\s*(.*?)(?=^[\w-]+:|\Z)", fm, re.M | re.S)
    return (name.group(1).strip().strip("\"'") if name else None,
            " ".join(desc.group(1).split()) if desc else "")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        repo, "core/tests/data/routing_paraphrases.jsonl")
    corpus = sys.argv[2] if len(sys.argv) > 2 else os.environ.get(
        "SKILLBOX_CORPUS", os.path.join(repo, "..", "shared", "corpus"))
    texts = collections.defaultdict(list)
    for f in sorted(glob.glob(f"{corpus}/**/SKILL.md", recursive=True)):
        name, desc = frontmatter(f)
        if name:
            texts[name].append(name.replace("-", " ") + " " + desc)
    if not texts:
        sys.exit(f"no skills under {corpus}")
    vocab = {n: set().union(*(words(t) for t in ts)) for n, ts in texts.items()}
    problems = []
    seen = set()
    counts = collections.Counter()
    per_skill = collections.Counter()
    for i, line in enumerate(open(path, encoding="utf-8"), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        q, skill, lang = row["query"], row["skill"], row["lang"]
        has_cjk = any(is_cjk(c) for c in q)
        if lang not in ("en", "zh") or (lang == "zh") != has_cjk:
            problems.append(f"line {i}: lang {lang!r} but the text is {'zh' if has_cjk else 'en'}: {q}")
        if q in seen:
            problems.append(f"line {i}: duplicate: {q}")
        seen.add(q)
        counts[lang] += 1
        if skill is None:
            counts["none"] += 1
            continue
        counts["labelled"] += 1
        per_skill[skill] += 1
        if skill not in vocab:
            problems.append(f"line {i}: {skill!r} is not a corpus skill")
            continue
        shared = sorted(words(q) & vocab[skill])
        if shared:
            problems.append(f"line {i}: shares {shared} with {skill}: {q}")
    labelled_en = sum(1 for l in open(path, encoding="utf-8") if l.strip() and json.loads(l)["skill"] and json.loads(l)["lang"] == "en")
    labelled_zh = counts["labelled"] - labelled_en
    print(f"{path}: {counts['en'] + counts['zh']} requests: {counts['labelled']} labelled "
          f"({labelled_en} en, {labelled_zh} zh), {counts['none']} for no skill; "
          f"{len(per_skill)} of {len(vocab)} skills covered, at most {max(per_skill.values(), default=0)} a skill")
    missing = sorted(set(vocab) - set(per_skill))
    if missing:
        print("skills without a request:", ", ".join(missing))
    for p in problems:
        print("VIOLATION", p)
    print(f"{len(problems)} violations")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
