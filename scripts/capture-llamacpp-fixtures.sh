#!/usr/bin/env bash
# Re-capture the raw llama-server wire samples in tests/fixtures/llamacpp/.
#
#   scripts/capture-llamacpp-fixtures.sh [OUT_DIR]
#
# Builds/reuses the cached llama-server (scripts/llama-server.sh) and the tiny
# model (scripts/tiny-model.sh), starts the server on 127.0.0.1 on a free port,
# records each exchange with curl (-i: status line + headers + raw body; -N for
# SSE), measures prefill speed at 1k/4k/16k tokens, then stops the server.
# Only 127.0.0.1 is contacted. Takes about a minute on 2 cores once built.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$HERE/../tests/fixtures/llamacpp}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

BIN="$("$HERE/llama-server.sh" | tail -n1)"
MODEL="$("$HERE/tiny-model.sh" 0 | tail -n1)"
PY="${CTXBENCH_CACHE:-$HOME/.cache/ctxbench}/venv/bin/python"
[[ -x "$PY" ]] || PY=python3

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "${BODY:-}" "${SLOTDIR:-}"; }
trap cleanup EXIT

# start_server LOGFILE ARGS... -> sets PORT, URL; waits for /health 200
start_server() {
    local log="$1"; shift
    PORT="$(free_port)"
    URL="http://127.0.0.1:$PORT"
    # Keep LLAMA_ARG_* out of the environment: they override defaults silently.
    env $(env | grep -o '^LLAMA_ARG_[A-Z_]*' | sed 's/^/-u /') \
        "$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" "$@" >"$log" 2>&1 &
    PIDS+=("$!")
    local i
    for i in $(seq 1 600); do
        if [[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health" || true)" == 200 ]]; then
            return 0
        fi
        sleep 0.1
    done
    echo "server did not become healthy; log: $log" >&2
    exit 1
}
stop_server() { local p="${PIDS[-1]}"; kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; unset 'PIDS[-1]'; }

# ids N [OFFSET] -> JSON list of N token ids (word pieces / chars, no specials)
ids() { "$PY" -c 'import sys,json; n=int(sys.argv[1]); o=int(sys.argv[2]); print(json.dumps([131 + (i*7 + o) % 420 for i in range(n)]))' "$1" "${2:-0}"; }

BODY="$(mktemp)"
get()  { curl -sS -i "$URL$1" -o "$OUT/$2"; }
# bodies go through a file: a 33k-id prompt is longer than one argv string may be
post() { printf '%s' "$2" > "$BODY"; curl -sS -i -H 'Content-Type: application/json' --data-binary @"$BODY" "$URL$1" -o "$OUT/$3"; }
sse()  { printf '%s' "$2" > "$BODY"; curl -sS -i -N -H 'Content-Type: application/json' --data-binary @"$BODY" "$URL$1" -o "$OUT/$3"; }

SLOTDIR="$(mktemp -d)"
SERVER_ARGS=(-c 32768 -np 1 -t 2 -tb 2 -b 2048 -ub 512 --no-webui --metrics)

echo "$BIN --version" > "$OUT/version.txt"
"$BIN" --version >>"$OUT/version.txt" 2>&1 || true

# --- health while loading: poll immediately after spawn --------------------
PORT="$(free_port)"; URL="http://127.0.0.1:$PORT"
"$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" "${SERVER_ARGS[@]}" >"$OUT/.server-loading.log" 2>&1 &
PIDS+=("$!")
: > "$OUT/health-loading.http"
for i in $(seq 1 400); do
    code="$(curl -s -i "$URL/health" -o "$OUT/.h" -w '%{http_code}' || true)"
    if [[ "$code" == 503 ]]; then cp "$OUT/.h" "$OUT/health-loading.http"; fi
    [[ "$code" == 200 ]] && break
    sleep 0.01
done
rm -f "$OUT/.h" "$OUT/.server-loading.log"
[[ -s "$OUT/health-loading.http" ]] || echo "(no 503 observed: the model loaded before the first successful connect)" > "$OUT/health-loading.http"
# POST /slots/{id}?action=... is refused unless the server has --slot-save-path
post /slots/0?action=erase '' slots-erase-no-save-path.http
stop_server

# --- main server --------------------------------------------------------------
start_server "$OUT/.server.log" "${SERVER_ARGS[@]}" --slot-save-path "$SLOTDIR"
echo "$BIN -m $MODEL --host 127.0.0.1 --port $PORT ${SERVER_ARGS[*]} --slot-save-path $SLOTDIR" > "$OUT/server-cmdline.txt"

P50="$(ids 50)"
get /health health.http
get /props props.http
get /slots slots-idle.http
get /v1/models v1-models.http
get /metrics metrics-before.http
post /tokenize '{"content":"hello world"}' tokenize.http
post /tokenize '{"content":"hello world","add_special":true,"with_pieces":true}' tokenize-pieces.http
post /detokenize '{"tokens":[1,200,201,202]}' detokenize.http

post /completion "{\"prompt\":$P50,\"n_predict\":8,\"ignore_eos\":true,\"cache_prompt\":false}" completion-nostream.http
sse  /completion "{\"prompt\":$P50,\"n_predict\":8,\"ignore_eos\":true,\"cache_prompt\":false,\"stream\":true}" completion-stream.sse
# default cache_prompt (true), same prompt twice: second shows cache_n > 0
post /slots/0?action=erase '' slots-erase.http
post /completion "{\"prompt\":$P50,\"n_predict\":8,\"ignore_eos\":true,\"cache_prompt\":true}" completion-cache-1.http
post /completion "{\"prompt\":$P50,\"n_predict\":8,\"ignore_eos\":true,\"cache_prompt\":true}" completion-cache-2.http
sse  /completion "{\"prompt\":$P50,\"n_predict\":8,\"ignore_eos\":true,\"cache_prompt\":true,\"stream\":true}" completion-cache-3-stream.sse
get /slots slots-after.http
post /slots/0?action=erase '' slots-erase-2.http
post /completion "{\"prompt\":$P50,\"n_predict\":8,\"ignore_eos\":true,\"cache_prompt\":true}" completion-after-erase.http
# per-token timings + progress events in the stream
sse  /completion "{\"prompt\":$(ids 1500),\"n_predict\":3,\"ignore_eos\":true,\"cache_prompt\":false,\"stream\":true,\"timings_per_token\":true,\"return_progress\":true}" completion-stream-progress.sse
# string prompt (BOS added), n_predict 0
post /completion '{"prompt":"hello world","n_predict":0,"cache_prompt":false}' completion-npredict0.http

sse /v1/completions "{\"model\":\"x\",\"prompt\":$P50,\"max_tokens\":8,\"ignore_eos\":true,\"cache_prompt\":false,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" v1-completions-stream.sse
post /v1/completions "{\"model\":\"x\",\"prompt\":$P50,\"max_tokens\":8,\"ignore_eos\":true,\"cache_prompt\":false}" v1-completions-nostream.http
sse /v1/chat/completions '{"model":"x","messages":[{"role":"user","content":"hello world"}],"max_tokens":8,"ignore_eos":true,"cache_prompt":false,"stream":true,"stream_options":{"include_usage":true}}' v1-chat-stream.sse
post /v1/chat/completions '{"model":"x","messages":[{"role":"user","content":"hello world"}],"max_tokens":8,"ignore_eos":true,"cache_prompt":false}' v1-chat-nostream.http

sse /v1/completions "{\"model\":\"x\",\"prompt\":$P50,\"max_tokens\":3,\"ignore_eos\":true,\"cache_prompt\":false,\"stream\":true}" v1-completions-stream-no-usage.sse
sse /v1/chat/completions '{"model":"x","messages":[{"role":"user","content":"hello world"}],"max_tokens":3,"ignore_eos":true,"cache_prompt":false,"stream":true}' v1-chat-stream-no-usage.sse
# response_fields trims the final event / non-stream body (list "stop" too, or it is dropped)
RF='"response_fields":["content","stop","stop_type","truncated","tokens_predicted","tokens_evaluated","tokens_cached","timings"]'
sse  /completion "{\"prompt\":$P50,\"n_predict\":3,\"ignore_eos\":true,\"cache_prompt\":false,\"stream\":true,$RF}" completion-stream-response-fields.sse
post /completion "{\"prompt\":$P50,\"n_predict\":3,\"ignore_eos\":true,\"cache_prompt\":false,\"return_tokens\":true,\"response_fields\":[\"tokens\",\"stop\",\"timings/prompt_n\",\"timings/cache_n\"]}" completion-response-fields-nested.http

# error cases
post /completion "{\"prompt\":$(ids 33000),\"n_predict\":4,\"cache_prompt\":false}" completion-too-long.http
sse  /completion "{\"prompt\":$(ids 33000),\"n_predict\":4,\"cache_prompt\":false,\"stream\":true}" completion-too-long-stream.sse
sse  /v1/completions "{\"model\":\"x\",\"prompt\":$(ids 33000),\"max_tokens\":4,\"cache_prompt\":false,\"stream\":true}" v1-completions-too-long-stream.sse
post /completion '{"prompt":"caf\u00e9","n_predict":2}' completion-nonascii.http
post /completion '{"prompt":[1,2,99999],"n_predict":2}' completion-bad-token.http
post /completion 'not json' completion-bad-json.http
post /slots/5?action=erase '' slots-erase-bad-id.http
get /metrics metrics-after.http

# --- prefill / decode speed at 1k, 4k, 16k --------------------------------------
speed() {
    echo "# $1; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# n_prompt  prompt_n  prompt_ms  prompt_per_second  predicted_n  predicted_ms  predicted_per_second  (cache_prompt:false, n_predict 32, ignore_eos)"
    for n in 1024 4096 16384; do
        printf '%s' "{\"prompt\":$(ids "$n" 3),\"n_predict\":32,\"ignore_eos\":true,\"cache_prompt\":false}" > "$BODY"
        curl -sS -H 'Content-Type: application/json' --data-binary @"$BODY" "$URL/completion" |
            "$PY" -c 'import sys,json; n=sys.argv[1]; t=json.load(sys.stdin)["timings"]; print(n, t["prompt_n"], round(t["prompt_ms"],1), round(t["prompt_per_second"]), t["predicted_n"], round(t["predicted_ms"],1), round(t["predicted_per_second"]))' "$n"
    done
}
speed "-t 2 -tb 2 -b 2048 -ub 512" > "$OUT/speed.txt"

stop_server
# keep the head of the server log (startup lines show n_ctx, slots, threads)
head -c 6000 "$OUT/.server.log" > "$OUT/server-stderr-head.txt"
rm -f "$OUT/.server.log"

# --- --cache-ram 0: erase really empties the slot ----------------------------------
start_server "$OUT/.server-nocram.log" "${SERVER_ARGS[@]}" --slot-save-path "$SLOTDIR" --cache-ram 0
echo "$BIN -m $MODEL --host 127.0.0.1 --port $PORT ${SERVER_ARGS[*]} --slot-save-path $SLOTDIR --cache-ram 0" > "$OUT/server-nocram-cmdline.txt"
RF='"response_fields":["stop","tokens_evaluated","tokens_cached","timings/cache_n","timings/prompt_n"]'
post /completion "{\"prompt\":$P50,\"n_predict\":2,\"ignore_eos\":true,$RF}" nocram-1-first.http
post /completion "{\"prompt\":$P50,\"n_predict\":2,\"ignore_eos\":true,$RF}" nocram-2-repeat.http
post /completion "{\"prompt\":$P50,\"n_predict\":2,\"ignore_eos\":true,\"cache_prompt\":false,$RF}" nocram-3-cache-false.http
post /slots/0?action=erase '' nocram-4-erase.http
post /completion "{\"prompt\":$P50,\"n_predict\":2,\"ignore_eos\":true,$RF}" nocram-5-after-erase.http
stop_server
rm -f "$OUT/.server-nocram.log"

# --- same speed sweep with one thread (robust when the other core is busy) ---------
start_server "$OUT/.server-t1.log" -c 32768 -np 1 -t 1 -tb 1 -b 2048 -ub 512 --no-webui
speed "-t 1 -tb 1 -b 2048 -ub 512" >> "$OUT/speed.txt"
stop_server
rm -f "$OUT/.server-t1.log"
cat "$OUT/speed.txt" >&2

# --- a vocabulary WITH bytes >= 0x80: provokes the mid-stream error event ----------
BYTEMODEL="$(mktemp --suffix=.gguf)"
"$PY" "$HERE/make-gguf.py" "$BYTEMODEL" --seed 0 --full-byte-range 2>/dev/null
MODEL_SAVED="$MODEL"; MODEL="$BYTEMODEL"
start_server "$OUT/.server-bytes.log" -c 4096 -np 1 -t 2 --no-webui
sse  /completion "{\"prompt\":$P50,\"n_predict\":400,\"ignore_eos\":true,\"cache_prompt\":false,\"stream\":true}" bytes-model-completion-stream.sse
sse  /v1/completions "{\"model\":\"x\",\"prompt\":$P50,\"max_tokens\":400,\"ignore_eos\":true,\"cache_prompt\":false,\"stream\":true}" bytes-model-v1-completions-stream.sse
post /completion "{\"prompt\":$P50,\"n_predict\":400,\"ignore_eos\":true,\"cache_prompt\":false,\"response_fields\":[\"stop_type\",\"tokens_predicted\"]}" bytes-model-completion-nostream.http
stop_server
grep -i "error\|invalid" "$OUT/.server-bytes.log" | head -20 > "$OUT/bytes-model-server-errors.txt" || true
rm -f "$OUT/.server-bytes.log" "$BYTEMODEL"
MODEL="$MODEL_SAVED"

# --- small-context server: generation that runs into the end of the context ----
start_server "$OUT/.server-small.log" -c 256 -np 1 -t 2 --no-webui
echo "$BIN -m $MODEL --host 127.0.0.1 --port $PORT -c 256 -np 1 -t 2 --no-webui" > "$OUT/server-small-cmdline.txt"
sse  /completion "{\"prompt\":$(ids 200),\"n_predict\":100,\"ignore_eos\":true,\"cache_prompt\":false,\"stream\":true}" small-ctx-fill-stream.sse
post /completion "{\"prompt\":$(ids 200),\"n_predict\":-1,\"ignore_eos\":true,\"cache_prompt\":false}" small-ctx-fill-unlimited.http
post /completion "{\"prompt\":$(ids 256),\"n_predict\":4,\"cache_prompt\":false}" small-ctx-prompt-eq-nctx.http
post /completion "{\"prompt\":$(ids 255),\"n_predict\":4,\"cache_prompt\":false}" small-ctx-prompt-nctx-minus-1.http
stop_server
rm -f "$OUT/.server-small.log"

# Trim any file over 8 KB (long streams / bodies): keep the first 3 KB and the
# last 4 KB (the final SSE event matters most) and mark the cut on its own line.
for f in "$OUT"/*.http "$OUT"/*.sse; do
    size="$(stat -c %s "$f")"
    if [[ "$size" -gt 8192 ]]; then
        { head -c 3072 "$f"; printf '\n...[%s bytes cut by capture script]...\n' "$((size - 7168))"; tail -c 4096 "$f"; } > "$f.tmp"
        mv "$f.tmp" "$f"
    fi
done
echo "fixtures written to $OUT" >&2
