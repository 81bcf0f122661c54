#!/usr/bin/env bash
# One ctxbench binary for any x86-64 Linux with glibc 2.17 or newer (the last decade), to
# copy onto the machine that serves the model:
#
#   bash scripts/build-portable.sh                # prints the binary's path (last line)
#   scp target/dist/ctxbench gpu-box:
#   ssh gpu-box ./ctxbench sweep --url http://127.0.0.1:30000 --lengths 1k,8k,32k,128k
#
# It is the binary of the manylinux2014 wheel (scripts/dist.sh builds both from one release
# compile, linked against glibc 2.17 by zig). Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
dist_env="$(bash scripts/dist.sh)" # an assignment, so that set -e stops on a failed build
eval "$dist_env"
echo "$CTXBENCH_PORTABLE"
