#!/usr/bin/env bash
# Render ctxbench HTML reports in headless Chromium and save screenshots, to look at them.
#
#   scripts/screenshot.sh [OUT_DIR]        # demo report + compare from built-in fixtures
#   scripts/screenshot.sh FILE.html OUT.png # one existing page
#
# HEIGHT=4000 takes a taller shot (the default window is 1200x2400).
# Needs Debian's `chromium` (apt-get update && apt-get install -y chromium).
set -euo pipefail
cd "$(dirname "$0")/.."

shoot() { # page.html out.png
    local profile
    profile=$(mktemp -d)
    chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --hide-scrollbars --window-size=1200,"${HEIGHT:-2400}" \
        --screenshot="$2" "file://$(realpath "$1")" 2>/dev/null
    rm -rf "$profile"
    echo "wrote $2"
}

if ! command -v chromium >/dev/null; then
    echo "chromium not found: apt-get update && apt-get install -y chromium" >&2
    exit 1
fi

if [[ $# -eq 2 ]]; then
    shoot "$1" "$2"
    exit 0
fi

out=$(realpath -m "${1:-target/screenshots}")
mkdir -p "$out"
cargo run -q --example report_demo -- "$out" >/dev/null
cargo run -q -- report "$out/a.jsonl" --html "$out/report.html"
cargo run -q -- compare "$out/a.jsonl" "$out/b.jsonl" --html "$out/compare.html"
shoot "$out/report.html" "$out/report.png"
shoot "$out/compare.html" "$out/compare.png"
