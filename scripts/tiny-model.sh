#!/usr/bin/env bash
# Make (once) and cache a tiny random-weight Llama GGUF for llama-server tests.
#
#   scripts/tiny-model.sh [SEED]              # default seed 0; prints the model path on stdout
#   scripts/tiny-model.sh --no-space [SEED]   # the variant whose tokenizer encodes no text
#
# Cached at $CTXBENCH_CACHE/models/tiny-llama-seed<SEED>.gguf (tiny-llama-nospace-seed<SEED>.gguf)
# (CTXBENCH_CACHE defaults to ~/.cache/ctxbench); reused when present.
# The generator (scripts/make-gguf.py) runs in the venv $CTXBENCH_CACHE/venv with
# pinned gguf/numpy. Progress to stderr; the final stdout line is the path.
set -euo pipefail

GGUF_VERSION="0.19.0"
NUMPY_VERSION="2.4.6"

VARIANT=()
NAME="tiny-llama"
if [[ "${1:-}" == "--no-space" ]]; then
    VARIANT=(--no-space)
    NAME="tiny-llama-nospace"
    shift
fi
SEED="${1:-0}"
[[ "$SEED" =~ ^[0-9]+$ ]] || { echo "usage: $0 [--no-space] [SEED]" >&2; exit 2; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CTXBENCH_CACHE:-$HOME/.cache/ctxbench}"
VENV="$CACHE/venv"
MODEL="$CACHE/models/$NAME-seed$SEED.gguf"

log() { printf '[tiny-model.sh] %s\n' "$*" >&2; }

if [[ -s "$MODEL" ]]; then
    echo "$MODEL"
    exit 0
fi

mkdir -p "$CACHE/models"
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv $VENV"
    python3 -m venv "$VENV" >&2
fi
if ! "$VENV/bin/python" - "$GGUF_VERSION" "$NUMPY_VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if (version("gguf"), version("numpy")) == (sys.argv[1], sys.argv[2]) else 1)
EOF
then
    log "installing gguf==$GGUF_VERSION numpy==$NUMPY_VERSION into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        "gguf==$GGUF_VERSION" "numpy==$NUMPY_VERSION" >&2
fi

# make-gguf.py writes to a temp name and renames, so a killed run leaves no half file.
"$VENV/bin/python" "$HERE/make-gguf.py" "$MODEL" --seed "$SEED" "${VARIANT[@]}" >&2
echo "$MODEL"
