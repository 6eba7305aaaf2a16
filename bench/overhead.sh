#!/usr/bin/env bash
# Measures the gateway's overhead on loopback (SPEC 16): hey against
# `switchyard mockllm` directly, then through the gateway, same run, and
# prints RPS, p50/p99 and the ratios. Bounded: each phase is a fixed
# number of requests. Usage: bench/overhead.sh [-n REQUESTS] [-c CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")/.."
N=20000; C=50
while getopts "n:c:" o; do case $o in n) N=$OPTARG;; c) C=$OPTARG;; *) exit 2;; esac; done
command -v hey >/dev/null || { echo "bench: needs hey (apt-get install -y hey)"; exit 1; }

out=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"; }
trap cleanup EXIT
go build -o "$out/switchyard" ./cmd/switchyard

MOCK=127.0.0.1:19001; GW=127.0.0.1:19002
"$out/switchyard" mockllm -listen $MOCK -ttfb 0s -tps 100000 2>"$out/mock.log" & pids+=($!)
cat > "$out/gw.yaml" <<YAML
server: {listen: "$GW"}
data_dir: ""
providers: [{name: mock, kind: openai, base_url: "http://$MOCK/v1", api_key: "x"}]
deployments: [{id: mock-1, model: bench, provider: mock}]
teams: [{name: bench, keys: ["sk-bench"], models: ["*"]}]
YAML
"$out/switchyard" serve -config "$out/gw.yaml" 2>"$out/gw.log" & pids+=($!)
for i in $(seq 1 50); do curl -sf "http://$GW/healthz" >/dev/null && curl -sf "http://$MOCK/healthz" >/dev/null && break; sleep 0.1; done

BODY='{"model":"bench","messages":[{"role":"user","content":"hello"}],"max_tokens":16}'
run() { # name url concurrency requests
  hey -n "$4" -c "$3" -m POST -H "Authorization: Bearer sk-bench" -T application/json -d "$BODY" "$2" > "$out/$1.txt"
  rps=$(awk '/Requests\/sec/ {print $2}' "$out/$1.txt")
  p50=$(awk '/ 50%/ {print $3}' "$out/$1.txt"); p99=$(awk '/ 99%/ {print $3}' "$out/$1.txt")
  ok=$(awk '/\[200\]/ {print $2}' "$out/$1.txt")
  printf "%-28s rps=%-10s p50=%-8ss p99=%-8ss 200s=%s/%s\n" "$1" "$rps" "$p50" "$p99" "${ok:-0}" "$4"
  eval "${1//-/_}_rps=$rps; ${1//-/_}_p50=$p50"
}
echo "== saturation: $C concurrent, $N requests each"
run direct-c$C "http://$MOCK/v1/chat/completions" $C $N
run gateway-c$C "http://$GW/v1/chat/completions" $C $N
echo "== one at a time: 2000 requests each"
run direct-c1 "http://$MOCK/v1/chat/completions" 1 2000
run gateway-c1 "http://$GW/v1/chat/completions" 1 2000
eval "gr=\$gateway_c${C}_rps; dr=\$direct_c${C}_rps"
awk -v a="$gr" -v b="$dr" -v c="$C" 'BEGIN{printf "throughput ratio gateway/direct (c=%s): %.3f\n", c, a/b}'
awk -v a="$gateway_c1_p50" -v b="$direct_c1_p50" 'BEGIN{printf "added p50 latency one at a time: %.0f us\n", (a-b)*1e6}'
