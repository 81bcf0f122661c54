#!/usr/bin/env bash
# Regenerate docs/schema/ from the record types (`ctxbench schema`): the schema of any
# record (record.schema.json) and one per kind. tests/offline/schema_records.rs fails when the
# committed copies differ from what the code generates.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --bin ctxbench
bin=target/debug/ctxbench
mkdir -p docs/schema
rm -f docs/schema/*.schema.json
"$bin" schema >docs/schema/record.schema.json
for kind in run sample error summary load_plan request server_metrics gpu_metrics cell knee effective_context sessions_plan turn sessions_cell session_capacity; do
    "$bin" schema "$kind" >"docs/schema/$kind.schema.json"
done
ls docs/schema >&2
