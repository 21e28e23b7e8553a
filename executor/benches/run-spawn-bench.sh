#!/usr/bin/env bash
# Runs the spawn benchmark (bare / skillbox / bwrap / docker) and writes target/spawn-bench.md.
# Installs bubblewrap first when missing (needs root or sudo); docker is used when its
# daemon answers, skipped otherwise. SPAWN_BENCH_N / SPAWN_BENCH_DOCKER_N set the run counts.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v bwrap >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "installing bubblewrap (for the bwrap comparison)" >&2
    $sudo apt-get update -qq && $sudo apt-get install -y -qq bubblewrap \
        || echo "could not install bubblewrap; the bench will skip bwrap" >&2
fi

exec cargo bench -p skillbox-executor --bench spawn "$@"
