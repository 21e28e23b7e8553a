# The skillbox core: gateway, router, proxies, secrets. Runs as the unprivileged user
# `skillbox` (10001) with no capabilities (compose.yaml drops them all).
#
# The binary is built on the host (docker/build.sh runs `cargo build --release`) and copied
# from target/release/; the build context is the repository root, trimmed by .dockerignore
# to the two binaries. On a machine that reaches a Rust image, docker/binaries.Dockerfile
# builds them in a container instead (see docker/README.md).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

# git: `skillbox skill add|update` fetch a skill's repository inside the core (the CLI sends
# them to the running core, POST /v1/skills/install); the CA certificates for https remotes.
RUN set -eu; \
    apt-get update -qq; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      git ca-certificates >/dev/null; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    git --version

ARG SKILLBOX_UID=10001
# /workspace holds skillbox.toml (a bind mount, read-only), skills/ (the `skills` volume:
# skills added through the core, written by it alone, so owned by its uid; a new volume
# takes this folder's owner), local-skills/ (the operator's folder, read-only) and
# .skillbox/ (the state volume, 0700). /executor-pki is the volume through which the executor gets its
# certificate, its key and the CA certificate, and nothing else of the state.
# No setuid/setgid program (su, passwd, mount...): where the engine cannot set
# no-new-privileges (Swarm ignores security_opt), none can raise a process's ids.
RUN groupadd --system --gid "${SKILLBOX_UID}" skillbox \
 && useradd --system --uid "${SKILLBOX_UID}" --gid "${SKILLBOX_UID}" --no-create-home \
      --home-dir /workspace --shell /usr/sbin/nologin skillbox \
 && mkdir -p /workspace/.skillbox /workspace/skills /workspace/local-skills /executor-pki \
 && chown "${SKILLBOX_UID}:${SKILLBOX_UID}" /workspace/.skillbox /workspace/skills /executor-pki \
 && chmod 0755 /workspace/skills \
 && chmod 0700 /workspace/.skillbox \
 && chmod 0755 /executor-pki \
 && find / -xdev -perm /6000 -type f -exec chmod a-s {} +

# target/release (docker/build.sh); SKILLBOX_PROFILE=debug builds pass target/debug.
ARG BIN_DIR=target/release
COPY ${BIN_DIR}/skillbox /usr/local/bin/skillbox

USER skillbox
WORKDIR /workspace
EXPOSE 7070 7072
# /healthz answers {"status":"ok","executor":"ok"} once the executor answers over mTLS.
# bash's /dev/tcp: the image needs no HTTP client.
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/7070 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && grep -q '\"executor\":\"ok\"' <&3"]
ENTRYPOINT ["skillbox"]
CMD ["serve", "--workspace", "/workspace"]
