#!/usr/bin/env bash
# Build the release artefacts from ONE release compile: the manylinux2014 wheel (glibc 2.17,
# linked by zig through maturin) and the portable binary, which is the wheel's own binary
# taken out of it (the same bytes).
#
#   eval "$(bash scripts/dist.sh)"   # sets CTXBENCH_WHEEL and CTXBENCH_PORTABLE
#
# stdout: two lines, CTXBENCH_WHEEL=PATH and CTXBENCH_PORTABLE=PATH (shell-quoted);
# progress goes to stderr. Outputs land in target/dist/ (wheel, `ctxbench`, build-seconds,
# and cargo-env: the environment maturin ran cargo with, for scripts/build-image.sh).
# maturin and ziglang come from pinned PyPI packages in a private venv, kept under
# CTXBENCH_CACHE (default ~/.cache/ctxbench). Cargo's incremental state under
# target/x86_64-unknown-linux-gnu/ makes a second run with no source change take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN_VERSION="1.16.0"
ZIGLANG_VERSION="0.17.1"
TARGET="x86_64-unknown-linux-gnu"
# manylinux2014 = glibc 2.17: any x86-64 Linux of the last decade (CentOS 7, Ubuntu 14.04+).
COMPAT="manylinux2014"

CACHE="${CTXBENCH_CACHE:-$HOME/.cache/ctxbench}"
VENV="$CACHE/dist-venv-maturin${MATURIN_VERSION}-zig${ZIGLANG_VERSION}"
OUT="$PWD/target/dist"

log() { printf '[dist.sh] %s\n' "$*" >&2; }

if ! "$VENV/bin/maturin" --version >/dev/null 2>&1; then
    log "installing maturin $MATURIN_VERSION and ziglang $ZIGLANG_VERSION into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
        "maturin==$MATURIN_VERSION" "ziglang==$ZIGLANG_VERSION" >&2
fi
# maturin finds zig as `python3 -m ziglang` of the python first on PATH: the venv's.
export PATH="$VENV/bin:$PATH"

# scripts/build-image.sh relinks this compile's binary statically. Cargo only calls the
# compiled dependencies fresh when it sees the environment maturin gave it (its zig
# wrappers as linker and C compiler are part of every unit's fingerprint), so a `cargo` shim
# first on PATH writes that environment to target/dist/cargo-env, then runs cargo.
SHIM="$PWD/target/dist-shim"
mkdir -p "$SHIM"
cat >"$SHIM/cargo" <<'SH'
#!/bin/sh
if [ "$1" = rustc ]; then
    env | grep -E '^(AR|CARGO_TARGET|CARGO_UNSTABLE|CARGO_ZIGBUILD|CC|CXX|RANLIB|CMAKE_TOOLCHAIN_FILE|ZIG_COMMAND|__CARGO_TEST_CHANNEL_OVERRIDE_DO_NOT_USE_THIS)[A-Za-z0-9_]*=' \
        >"$CTXBENCH_CARGO_ENV"
fi
exec "$CTXBENCH_REAL_CARGO" "$@"
SH
chmod 755 "$SHIM/cargo"
CTXBENCH_REAL_CARGO="$(command -v cargo)"
export CTXBENCH_REAL_CARGO CTXBENCH_CARGO_ENV="$OUT/cargo-env"
export PATH="$SHIM:$PATH"

if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
    log "adding the Rust target $TARGET"
    rustup target add "$TARGET" >&2
fi

rm -rf "$OUT"
mkdir -p "$OUT"
log "maturin build --release --zig --compatibility $COMPAT --target $TARGET"
start=$(date +%s)
maturin build --release --locked --zig --compatibility "$COMPAT" --target "$TARGET" \
    --out "$OUT" >&2
secs=$(($(date +%s) - start))
echo "$secs" >"$OUT/build-seconds"
log "wheel built in ${secs}s"

shopt -s nullglob
wheels=("$OUT"/ctxbench-*.whl)
if [[ ${#wheels[@]} -ne 1 ]]; then
    log "expected one wheel in $OUT, found ${#wheels[@]}"
    exit 1
fi
WHEEL="${wheels[0]}"

# The portable binary is the wheel's: a wheel is a zip, the binary its `*.data/scripts/`.
python3 - "$WHEEL" "$OUT/ctxbench" <<'EOF'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".data/scripts/ctxbench")]
    if len(names) != 1:
        sys.exit(f"{wheel}: expected one .data/scripts/ctxbench, found {names}")
    with z.open(names[0]) as src, open(dest, "wb") as out:
        out.write(src.read())
EOF
chmod 755 "$OUT/ctxbench"
log "portable binary: $OUT/ctxbench ($("$OUT/ctxbench" --version))"

printf 'CTXBENCH_WHEEL=%q\n' "$WHEEL"
printf 'CTXBENCH_PORTABLE=%q\n' "$OUT/ctxbench"
