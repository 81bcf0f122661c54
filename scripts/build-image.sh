#!/usr/bin/env bash
# The container image CI builds and runs, from what CI can reach (no public base image):
# Containerfile.scratch, FROM scratch, with a statically linked release ctxbench and the
# host's Debian CA bundle, built with buildah as localhost/ctxbench:latest.
#
#   eval "$(bash scripts/build-image.sh)"   # sets CTXBENCH_IMAGE=localhost/ctxbench:latest
#
# stdout: one line, CTXBENCH_IMAGE=NAME; progress goes to stderr.
#
# - buildah is installed with apt-get when missing; it runs with `--storage-driver vfs`
#   (no overlay mounts needed) and `--isolation chroot` (no user namespaces needed).
# - The static binary reuses scripts/dist.sh's release compile: only main.rs is compiled
#   again and linked with `-C target-feature=+crt-static` by the host's cc against glibc's
#   libc.a (zig, which links the wheel, has no static glibc). For cargo to call the
#   compiled units fresh it must see the environment maturin gave it (its zig wrappers as
#   target linker and C compiler are part of every unit's fingerprint): dist.sh records it
#   in target/dist/cargo-env. Without a dist build first, this compiles everything once.
# - Nothing changed (same binary, CA bundle and Containerfile): the image is not rebuilt.
# - Old images of this name and their working containers are removed (vfs copies every
#   layer in full).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="localhost/ctxbench:latest"
TARGET="x86_64-unknown-linux-gnu"
CONTEXT="$PWD/target/image"
CA_BUNDLE="/etc/ssl/certs/ca-certificates.crt"
B=(buildah --storage-driver vfs)

log() { printf '[build-image.sh] %s\n' "$*" >&2; }

# Another apt or dpkg may hold the lock (a cold machine runs several installs): wait for it.
apt_install() {
    local apt=(apt-get -o DPkg::Lock::Timeout=600)
    log "apt-get install $* (waiting up to 10 min for the dpkg lock if another install holds it)"
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "$@" >&2 ||
        { "${apt[@]}" update >&2 && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "$@" >&2; }
}

if ! command -v buildah >/dev/null; then
    log "installing buildah (apt-get)"
    apt_install buildah
fi
if [[ ! -s "$CA_BUNDLE" ]]; then
    log "installing ca-certificates (apt-get)"
    apt_install ca-certificates
fi
if [[ ! -e /usr/lib/x86_64-linux-gnu/libc.a ]]; then
    log "installing libc6-dev (glibc's libc.a, for the static link)"
    apt_install libc6-dev
fi

start=$(date +%s)
log "static release binary (cargo rustc … -C target-feature=+crt-static -C linker=cc)"
(
    # The environment maturin ran cargo with (scripts/dist.sh records it): the same target
    # linker and C compiler, so that every compiled unit is fresh; the later `-C linker=cc`
    # below overrides the linker for this one binary.
    if [[ -s target/dist/cargo-env ]]; then
        while IFS= read -r kv; do export "$kv"; done <target/dist/cargo-env
    else
        log "no target/dist/cargo-env (scripts/dist.sh not run here): a full release compile"
    fi
    cargo rustc --profile release --target "$TARGET" --locked --bin ctxbench -- \
        -C strip=symbols -C target-feature=+crt-static -C linker=cc >&2
)
BIN="target/$TARGET/release/ctxbench"
# A static binary has no program interpreter (no ld.so to find).
if readelf -l "$BIN" | grep -q 'Requesting program interpreter'; then
    log "$BIN is not statically linked"
    exit 1
fi
log "static binary in $(($(date +%s) - start))s: $("$BIN" --version)"

mkdir -p "$CONTEXT"
cp "$BIN" "$CONTEXT/ctxbench.new" && mv -f "$CONTEXT/ctxbench.new" "$CONTEXT/ctxbench"
cp -L "$CA_BUNDLE" "$CONTEXT/ca-certificates.crt"
cp Containerfile.scratch "$CONTEXT/Containerfile"
inputs=$(cd "$CONTEXT" && sha256sum ctxbench ca-certificates.crt Containerfile | sha256sum | cut -c1-32)

have=$("${B[@]}" inspect --type image --format '{{index .OCIv1.Config.Labels "ctxbench.inputs"}}' "$IMAGE" 2>/dev/null || true)
if [[ "$have" == "$inputs" ]]; then
    log "$IMAGE is up to date (inputs $inputs)"
else
    log "buildah bud $IMAGE (inputs $inputs)"
    # Working containers of earlier images of this name first: they pin the old layers.
    "${B[@]}" containers --format '{{.ContainerID}} {{.ImageName}}' 2>/dev/null |
        awk -v img="$IMAGE" '$2 == img {print $1}' | while read -r id; do
            "${B[@]}" rm "$id" >/dev/null
        done
    "${B[@]}" bud --isolation chroot --layers=false --label "ctxbench.inputs=$inputs" \
        -f "$CONTEXT/Containerfile" -t "$IMAGE" "$CONTEXT" >&2
    # The image this tag replaced is dangling now; vfs keeps a full copy of its layers.
    "${B[@]}" rmi --prune >/dev/null 2>&1 || true
fi
log "$IMAGE: $("${B[@]}" images --format '{{.Size}}' "$IMAGE") (binary $(stat -c %s "$CONTEXT/ctxbench") bytes, CA bundle $(stat -c %s "$CONTEXT/ca-certificates.crt") bytes) in $(($(date +%s) - start))s"
printf 'CTXBENCH_IMAGE=%q\n' "$IMAGE"
