#!/usr/bin/env bash
# Runs issue 15's hostile clients and upstreams against a freshly built
# gateway on loopback (bench/hostile): slow bodies with and without a key,
# concurrent authenticated ~10 MiB uploads against the node-wide body budget
# (server.max_inflight_body_bytes), headers that never end, huge message and
# input counts, stream clients that never read, an endless upstream SSE
# event, an upstream that echoes its key.
# Prints RSS before/peak/after and goroutines before/after per phase. The
# machine is shared and noisy: the figures are orders of magnitude, not
# timings. Bounded; the gateway it starts is stopped on exit.
#
#   bench/hostile.sh [-c CONNS] [-u UPLOADS] [-i MAX_INFLIGHT_BODY_BYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
C=200 U=40 I=0
while getopts "c:u:i:" o; do case $o in c) C=$OPTARG;; u) U=$OPTARG;; i) I=$OPTARG;; *) exit 2;; esac; done
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
go build -o "$out/switchyard" ./cmd/switchyard
go build -o "$out/hostile" ./bench/hostile
"$out/hostile" -gateway "$out/switchyard" -conns "$C" -uploads "$U" -inflight "$I"
