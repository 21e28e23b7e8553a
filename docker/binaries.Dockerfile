# Builds the two release binaries in a Rust container, for machines that reach a Rust
# image but have no Rust toolchain; the result lands in target/release/ where
# docker/core.Dockerfile and docker/executor.Dockerfile take it:
#
#   DOCKER_BUILDKIT=1 docker build -f docker/binaries.Dockerfile \
#       --output type=local,dest=target/release .
#   SKILLBOX_SKIP_CARGO=1 docker/build.sh
#
# BuildKit reads docker/binaries.Dockerfile.dockerignore instead of the root .dockerignore
# (which lets only the binaries through). Same Debian release as the runtime images, so
# the binaries link against the same glibc.
ARG RUST_IMAGE=rust:1-bookworm
FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skillbox-core -p skillbox-executor \
 && mkdir /out && cp target/release/skillbox target/release/skillbox-executor /out/

FROM scratch
COPY --from=build /out/ /
