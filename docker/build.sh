#!/usr/bin/env bash
# Builds the two release binaries on this machine and the images skillbox-core and
# skillbox-executor from them.
#
#   docker/build.sh                  # cargo build --release, then both images
#   SKILLBOX_SKIP_CARGO=1 docker/build.sh    # images from the binaries already built
#   SKILLBOX_PROFILE=debug docker/build.sh   # target/debug binaries (CI: already built by
#                                            # the test run; saves the release compile)
#   SKILLBOX_PACKAGES_ONLY=1 docker/build.sh # only the base and the images' layers before
#                                            # the binaries (their Debian packages), into the
#                                            # build cache; needs no binary (CI: while the
#                                            # tests compile and run)
#
# The binaries are taken from $CARGO_TARGET_DIR/<profile> when CARGO_TARGET_DIR is set (else
# target/<profile>); from outside the repository they are copied to target/docker-bin/ first,
# since the image build context is the repository.
#
# The base image: SKILLBOX_BASE_IMAGE when set; else debian:bookworm-slim when it is
# present or a registry serves it; else skillbox-base:bookworm, made by
# docker/build-base.sh (debootstrap + docker import; skipped when it exists). Whichever it
# is, it is also tagged skillbox-base:bookworm, the base compose.yaml builds on by default,
# so a later `docker compose up --build` needs no registry.
# Tags: SKILLBOX_CORE_IMAGE (skillbox-core:latest), SKILLBOX_EXECUTOR_IMAGE
# (skillbox-executor:latest). SKILLBOX_EXTRA_DEBIAN_PACKAGES: more Debian packages in the
# executor image (its build argument EXTRA_DEBIAN_PACKAGES; docker/README.md).
set -euo pipefail
# Resolved before the cd: a relative CARGO_TARGET_DIR is relative to where the user is.
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-$(dirname "$0")/../target}")
cd "$(dirname "$0")/.."
repo=$(pwd -P)

core_image=${SKILLBOX_CORE_IMAGE:-skillbox-core:latest}
executor_image=${SKILLBOX_EXECUTOR_IMAGE:-skillbox-executor:latest}
profile=${SKILLBOX_PROFILE:-release}
case $profile in
  release) cargo_args=(--release) ;;
  debug) cargo_args=() ;;
  *) echo "build: SKILLBOX_PROFILE must be release or debug, not $profile" >&2; exit 2 ;;
esac
built=$target_dir/$profile

skip_cargo=${SKILLBOX_SKIP_CARGO:-0}
packages_only=${SKILLBOX_PACKAGES_ONLY:-0}
[ "$packages_only" != 1 ] || skip_cargo=1
if [ "$skip_cargo" != 1 ]; then
  echo "build: cargo build ${cargo_args[*]} -p skillbox-cli -p skillbox-executor"
  cargo build "${cargo_args[@]}" --locked -p skillbox-cli -p skillbox-executor
fi
for bin in skillbox skillbox-executor; do
  if [ "$packages_only" != 1 ] && [ ! -x "$built/$bin" ]; then
    if [ "$skip_cargo" = 1 ]; then
      echo "build: $built/$bin is missing; SKILLBOX_SKIP_CARGO=1 packs binaries already built:" \
        "build them first (cargo build ${cargo_args[*]} -p skillbox-cli -p skillbox-executor)" \
        "or run docker/build.sh without SKILLBOX_SKIP_CARGO" >&2
    else
      echo "build: cargo build succeeded but $built/$bin is missing;" \
        "is CARGO_TARGET_DIR (${CARGO_TARGET_DIR:-unset}) or a cargo config target-dir pointing elsewhere?" >&2
    fi
    exit 1
  fi
done
# The build context is the repository (.dockerignore admits target/<profile>/ and
# target/docker-bin/<profile>/ binaries only).
if [ "$built" = "$repo/target/$profile" ] || [ "$packages_only" = 1 ]; then
  bin_dir=target/$profile
else
  bin_dir=target/docker-bin/$profile
  mkdir -p "$bin_dir"
  cp -f "$built/skillbox" "$built/skillbox-executor" "$bin_dir/"
  echo "build: binaries from $built (copied to $bin_dir)"
fi

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

build() { # image dockerfile [docker build arguments...]
  local image=$1 dockerfile=$2 started context=.
  shift 2
  started=$(date +%s)
  local log
  log=$(mktemp)
  if [ "$packages_only" = 1 ]; then
    # The Dockerfile up to its binaries, the same instructions with the same arguments:
    # the full build later finds these layers in the cache.
    context=$(mktemp -d)
    sed '/^ARG BIN_DIR/,$d' "$dockerfile" >"$context/Dockerfile"
    dockerfile=$context/Dockerfile
    image=$image-packages
  fi
  if ! docker build --build-arg "BASE_IMAGE=$base" --build-arg "BIN_DIR=$bin_dir" "$@" -f "$dockerfile" -t "$image" "$context" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "build: docker build -f $dockerfile failed" >&2
    return 1
  fi
  rm -f "$log"
  [ "$context" = . ] || rm -rf "$context"
  echo "build: $image in $(($(date +%s) - started)) s ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}'))"
}
build "$core_image" docker/core.Dockerfile
build "$executor_image" docker/executor.Dockerfile \
  --build-arg "EXTRA_DEBIAN_PACKAGES=${SKILLBOX_EXTRA_DEBIAN_PACKAGES:-}"
# compose.yaml's default base: tagging the base (present now: the builds used it) keeps
# `docker compose up --build` offline.
local_base=skillbox-base:bookworm
if [ "$base" != "$local_base" ]; then
  docker tag "$base" "$local_base"
fi
