#!/usr/bin/env bash
# Builds the two release binaries on this machine and the images skillbox-core and
# skillbox-executor from them.
#
#   docker/build.sh                  # cargo build --release, then both images
#   SKILLBOX_SKIP_CARGO=1 docker/build.sh    # images from the binaries already built
#   SKILLBOX_PROFILE=debug docker/build.sh   # target/debug binaries (CI: already built by
#                                            # the test run; saves the release compile)
#
# The base image: SKILLBOX_BASE_IMAGE when set; else debian:bookworm-slim when it is
# present or a registry serves it; else skillbox-base:bookworm, made by
# docker/build-base.sh (debootstrap + docker import; skipped when it exists).
# Tags: SKILLBOX_CORE_IMAGE (skillbox-core:latest), SKILLBOX_EXECUTOR_IMAGE
# (skillbox-executor:latest).
set -euo pipefail
cd "$(dirname "$0")/.."

core_image=${SKILLBOX_CORE_IMAGE:-skillbox-core:latest}
executor_image=${SKILLBOX_EXECUTOR_IMAGE:-skillbox-executor:latest}
profile=${SKILLBOX_PROFILE:-release}
case $profile in
  release) cargo_args=(--release) ;;
  debug) cargo_args=() ;;
  *) echo "build: SKILLBOX_PROFILE must be release or debug, not $profile" >&2; exit 2 ;;
esac
bin_dir=target/$profile

if [ "${SKILLBOX_SKIP_CARGO:-0}" != 1 ]; then
  echo "build: cargo build ${cargo_args[*]} -p skillbox-core -p skillbox-executor"
  cargo build "${cargo_args[@]}" --locked -p skillbox-core -p skillbox-executor
fi
for bin in skillbox skillbox-executor; do
  if [ ! -x "$bin_dir/$bin" ]; then
    echo "build: $bin_dir/$bin is missing; run without SKILLBOX_SKIP_CARGO" >&2
    exit 1
  fi
done

base=${SKILLBOX_BASE_IMAGE:-}
if [ -z "$base" ]; then
  if docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
    base=debian:bookworm-slim
  elif timeout 60 docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
    base=debian:bookworm-slim
  else
    echo "build: no registry serves debian:bookworm-slim; using a local debootstrap base"
    base=skillbox-base:bookworm
    SKILLBOX_BASE_IMAGE=$base docker/build-base.sh
  fi
fi
echo "build: base image $base"

build() { # image dockerfile
  local started
  started=$(date +%s)
  local log
  log=$(mktemp)
  if ! docker build --build-arg "BASE_IMAGE=$base" --build-arg "BIN_DIR=$bin_dir" -f "$2" -t "$1" . >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "build: docker build -f $2 failed" >&2
    return 1
  fi
  rm -f "$log"
  echo "build: $1 in $(($(date +%s) - started)) s ($(docker image inspect -f '{{.Size}}' "$1" | awk '{printf "%d MB", $1/1e6}'))"
}
build "$core_image" docker/core.Dockerfile
build "$executor_image" docker/executor.Dockerfile
