# The skillbox executor: runs every tool call in its kernel sandbox (Landlock + seccomp,
# a per-call user id, rlimits). Holds no secret but its own channel key.
#
# It runs as root *inside* the container so that each call gets its own user id
# (2000000+); compose.yaml keeps only the capabilities that needs (docker/README.md says
# which and why), sets no-new-privileges, a read-only root and an internal-only network.
# The tools themselves run with no capability at all.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

# What the programs of published skills run: sh (in the base), python3 with pip (dependency
# builds: `python3 -m pip install --target`), node with npm (the Node dependency builds:
# `npm ci`/`npm install` of a skill's package.json; Debian's nodejs does not include npm),
# curl, git and the CA certificates their TLS clients trust.
RUN set -eu; \
    apt-get update -qq; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-pip nodejs npm curl git ca-certificates >/dev/null; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    python3 --version; python3 -m pip --version; node --version; npm --version; \
    curl --version | head -n1; git --version; test -s /etc/ssl/certs/ca-certificates.crt

# EXTRA_DEBIAN_PACKAGES adds more from the Debian mirror, e.g.
#   docker compose build --build-arg EXTRA_DEBIAN_PACKAGES="libreoffice-writer-nogui chromium-headless-shell" executor
# or SKILLBOX_EXTRA_DEBIAN_PACKAGES in the environment of docker/build.sh and compose
# (docker/README.md, "Extending the executor image"). A layer of its own: the layer above
# is the same for every image, so an extended build reuses it from the cache. The man
# folder the base leaves out is made first: the JDK's packages link their man pages there
# and fail to configure without it.
ARG EXTRA_DEBIAN_PACKAGES=""
RUN set -eu; \
    if [ -n "$EXTRA_DEBIAN_PACKAGES" ]; then \
      mkdir -p /usr/share/man/man1; \
      apt-get update -qq; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $EXTRA_DEBIAN_PACKAGES >/dev/null; \
      rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    fi

ARG SKILLBOX_UID=10001
# /skills, /local-skills: the skills the core installed (the `skills` volume, which the
# core writes: owned by its uid here too, so the volume is right whichever container
# mounts it first) and the operator's folder (both read-only here). /pki: the executor's certificate, key and the
# CA certificate, written by the core (uid 10001) into a shared volume; the folder belongs
# to that uid so the volume is right whichever container mounts it first.
# No setuid/setgid program (su, passwd, mount...): where the engine cannot set
# no-new-privileges (Swarm ignores security_opt), none can raise a process's ids.
# /var/lib/skillbox-executor: the scratch volume (compose.yaml); a new volume takes this
# folder's owner and mode.
RUN mkdir -p /skills /local-skills /pki /var/lib/skillbox-executor \
 && chmod 0711 /var/lib/skillbox-executor \
 && chown "${SKILLBOX_UID}:${SKILLBOX_UID}" /pki /skills \
 && chmod 0755 /pki /skills \
 && find / -xdev -perm /6000 -type f -exec chmod a-s {} +

# target/release (docker/build.sh); SKILLBOX_PROFILE=debug builds pass target/debug.
ARG BIN_DIR=target/release
COPY ${BIN_DIR}/skillbox-executor /usr/local/bin/skillbox-executor

EXPOSE 7071
# Healthy while something listens on 7071 (0x1B9F, state 0A in /proc/net/tcp): a probe
# that connects would be one more refused mTLS handshake in the log every few seconds.
# Whether the executor answers RPCs is the core's /healthz (and the core's healthcheck).
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
  CMD ["bash", "-c", "grep -qi ':1B9F [0-9A-F]*:0000 0A' /proc/net/tcp /proc/net/tcp6"]
ENTRYPOINT ["skillbox-executor"]
CMD ["serve", "--skills", "/skills", "--listen", "0.0.0.0:7071", "--pki", "/pki", \
     "--core-url", "https://core:7072", "--wait-pki", "300"]
