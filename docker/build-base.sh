#!/usr/bin/env bash
# Builds a local Debian bookworm base image equivalent to debian:bookworm-slim, for
# machines where no container registry answers: `debootstrap --variant=minbase` from the
# Debian mirror, slimmed like the official image, then `docker import`.
#
#   docker/build-base.sh            # makes skillbox-base:bookworm unless it exists
#   docker/build-base.sh --force    # rebuilds it
#
# Environment: SKILLBOX_BASE_IMAGE (tag, default skillbox-base:bookworm), DEBIAN_MIRROR
# (default http://deb.debian.org/debian), DEBIAN_SUITE (default bookworm).
# Needs root (debootstrap) and debootstrap itself (installed with apt-get when missing).
set -euo pipefail

tag=${SKILLBOX_BASE_IMAGE:-skillbox-base:bookworm}
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
force=0
for arg in "$@"; do
  case $arg in
    --force) force=1 ;;
    *) echo "usage: $0 [--force]" >&2; exit 2 ;;
  esac
done

if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "build-base: $tag exists; skipping (--force rebuilds it)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "build-base: debootstrap needs root; run as root (or with sudo)" >&2
  exit 1
fi
if ! command -v debootstrap >/dev/null; then
  echo "build-base: installing debootstrap with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

started=$(date +%s)
rootfs=$(mktemp -d /var/tmp/skillbox-base.XXXXXX)
cleanup() { rm -rf --one-file-system "$rootfs"; }
trap cleanup EXIT

echo "build-base: debootstrap --variant=minbase $suite from $mirror"
debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
  tail -n 30 "$rootfs.log" >&2
  rm -f "$rootfs.log"
  echo "build-base: debootstrap failed (is $mirror reachable?)" >&2
  exit 1
}
rm -f "$rootfs.log"

# What the official slim image does: no docs, man pages or locales from later installs,
# no apt caches in layers, no recommends.
mkdir -p "$rootfs/etc/dpkg/dpkg.cfg.d" "$rootfs/etc/apt/apt.conf.d"
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
EOF
echo 'APT::Install-Recommends "false";' >"$rootfs/etc/apt/apt.conf.d/docker-no-recommends"
# dpkg without an fsync per file, as the official image has it: an image layer is written
# whole or not at all, and the images' installs (npm's hundreds of small packages) spent
# most of their time in fsync.
echo 'force-unsafe-io' >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
EOF
find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
  "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
  "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log "$rootfs"/tmp/* "$rootfs"/root/.cache
: >"$rootfs/etc/hostname"
: >"$rootfs/etc/resolv.conf"

echo "build-base: docker import as $tag"
tar --numeric-owner --xattrs -C "$rootfs" -c . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "debootstrap --variant=minbase $suite ($mirror), slimmed" \
    - "$tag" >/dev/null
echo "build-base: $tag built in $(($(date +%s) - started)) s ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%d MB", $1/1e6}'))"
