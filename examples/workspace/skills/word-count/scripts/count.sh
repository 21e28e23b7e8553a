#!/bin/sh
# word-count tool (plain protocol): the arguments {"text": "..."} arrive as JSON on stdin.
# Strip the JSON wrapper and count whitespace-separated words.
set -eu
sed -e 's/^[[:space:]]*{[[:space:]]*"text"[[:space:]]*:[[:space:]]*"//' \
    -e 's/"[[:space:]]*}[[:space:]]*$//' \
    -e 's/\\n/ /g' | wc -w | tr -d ' '
