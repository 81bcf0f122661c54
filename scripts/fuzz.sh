#!/usr/bin/env bash
# Fuzz the stream parsers and the result-file reader for a bounded time each.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    (default 60 s; sse ndjson resultfile)
#
# cargo-fuzz needs nightly rustc flags (-Zsanitizer, sancov). A nightly toolchain is used
# when rustup has one; otherwise the stable compiler is told to accept them with
# RUSTC_BOOTSTRAP=1, the documented escape hatch for building with unstable flags.
# FUZZ_SANITIZER=none skips AddressSanitizer (faster; Rust code is memory-safe anyway,
# so panics are what this mostly finds).
set -euo pipefail

cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(sse ndjson resultfile)
sanitizer="${FUZZ_SANITIZER:-address}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz (cargo install cargo-fuzz --locked)..." >&2
    cargo install cargo-fuzz --locked
fi

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
    echo "toolchain: nightly" >&2
else
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
    echo "toolchain: stable with RUSTC_BOOTSTRAP=1" >&2
fi

status=0
summary=()
for t in "${targets[@]}"; do
    corpus="fuzz/corpus/$t"
    mkdir -p "$corpus" "fuzz/artifacts/$t"
    before=$(find "fuzz/artifacts/$t" -type f | wc -l)
    log="fuzz/artifacts/$t.log"
    echo "== $t: ${secs} s" >&2
    set +e
    (cd fuzz && "${fuzz[@]}" run --sanitizer "$sanitizer" "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$secs" -print_final_stats=1) >"$log" 2>&1
    rc=$?
    set -e
    runs=$(grep -oE 'Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' | tail -1 || true)
    [ -n "$runs" ] || runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1 || true)
    after=$(find "fuzz/artifacts/$t" -type f | wc -l)
    crashes=$((after - before))
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 || true)
    line="$t: ${runs:-?} inputs in ${secs} s, ${cov:-cov: ?}, corpus $(find "$corpus" -type f | wc -l) files, $crashes new crash file(s), exit $rc"
    summary+=("$line")
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
        status=1
        echo "--- $t failed; last lines of $log:" >&2
        tail -30 "$log" >&2
    fi
done
printf '%s\n' "${summary[@]}"
exit "$status"
