#!/usr/bin/env bash
# Measures the gateway's overhead on loopback (SPEC 16), every figure as a
# ratio against a baseline measured in the same run: `wrk` against
# `switchyard mockllm` directly, through a bare httputil.ReverseProxy (the
# floor; with -r it makes one Redis EVALSHA per request) and through the
# gateway (with -r its team limits live in Redis). Phases are interleaved
# over several rounds to spread the machine's noise. With -t a second
# gateway with tracing on (sample_ratio 1, every span exported to a
# discarding OTLP sink, bench/otlpsink) runs beside the first, and its
# figures are reported as ratios against the untraced gateway. Bounded: each
# phase runs for a fixed time; every process it starts is stopped on exit.
#
#   bench/overhead.sh [-d SECONDS] [-c CONCURRENCY] [-k ROUNDS] [-r] [-t]
set -euo pipefail
cd "$(dirname "$0")/.."
D=5; C=50; K=3; REDIS=0; TRACE=0
while getopts "d:c:k:rt" o; do case $o in d) D=$OPTARG;; c) C=$OPTARG;; k) K=$OPTARG;; r) REDIS=1;; t) TRACE=1;; *) exit 2;; esac; done
command -v wrk >/dev/null || { echo "bench: needs wrk (apt-get install -y wrk)"; exit 1; }
[ $REDIS = 0 ] || command -v redis-server >/dev/null || { echo "bench: -r needs redis-server"; exit 1; }

out=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"; }
trap cleanup EXIT
echo "building..."
go build -o "$out/switchyard" ./cmd/switchyard
go build -o "$out/floorproxy" ./bench/floorproxy
[ $TRACE = 0 ] || go build -o "$out/otlpsink" ./bench/otlpsink

MOCK=127.0.0.1:19001; GW=127.0.0.1:19002; FLOOR=127.0.0.1:19003; RPORT=19004; GWT=127.0.0.1:19005; SINK=127.0.0.1:19006
"$out/switchyard" mockllm -listen $MOCK -ttfb 0s -tps 100000 2>"$out/mock.log" & pids+=($!)
redis_yaml=""; floor_redis=""; limits=""
if [ $REDIS = 1 ]; then
  redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --loglevel warning & pids+=($!)
  redis_yaml="redis: {url: \"redis://127.0.0.1:$RPORT/0\"}"
  floor_redis="-redis 127.0.0.1:$RPORT"
  limits=", rpm: 100000000, tpm: 100000000000"
fi
"$out/floorproxy" -listen $FLOOR -upstream "http://$MOCK" $floor_redis 2>"$out/floor.log" & pids+=($!)
cat > "$out/gw.yaml" <<YAML
server: {listen: "$GW"}
data_dir: ""
$redis_yaml
providers: [{name: mock, kind: openai, base_url: "http://$MOCK/v1", api_key: "x"}]
deployments: [{id: mock-1, model: bench, provider: mock}]
routing: {session_keeping: false}
teams: [{name: bench, keys: ["sk-bench"], models: ["*"]$limits}]
YAML
"$out/switchyard" serve -config "$out/gw.yaml" 2>"$out/gw.log" & pids+=($!)
if [ $TRACE = 1 ]; then
  "$out/otlpsink" -listen $SINK 2>"$out/sink.log" & pids+=($!)
  sed -e "s/listen: \"$GW\"/listen: \"$GWT\"/" "$out/gw.yaml" > "$out/gwt.yaml"
  echo "tracing: {otlp_endpoint: \"http://$SINK\", sample_ratio: 1.0}" >> "$out/gwt.yaml"
  "$out/switchyard" serve -config "$out/gwt.yaml" 2>"$out/gwt.log" & pids+=($!)
fi
for i in $(seq 1 100); do
  curl -sf "http://$GW/healthz" >/dev/null && curl -sf "http://$MOCK/healthz" >/dev/null &&
    { [ $TRACE = 0 ] || curl -sf "http://$GWT/healthz" >/dev/null; } && break; sleep 0.1
done

cat > "$out/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"hello"}],"max_tokens":16}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.1f %.1f %.1f\n", summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99)))
end
LUA
declare -A SUM
run() { # name url connections threads
  wrk -t"$4" -c"$3" -d"${D}s" -s "$out/post.lua" "$2" > "$out/$1.txt" 2>&1
  read -r _ n errs rps p50 p99 < <(grep RESULT "$out/$1.txt")
  printf "  %-9s rps=%-8.0f p50=%-8sus p99=%-8sus requests=%s errors=%s\n" "$1" "$rps" "$p50" "$p99" "$n" "$errs"
  SUM[$1.rps]=$(echo "${SUM[$1.rps]:-0} + $rps" | bc -l); SUM[$1.p50]=$(echo "${SUM[$1.p50]:-0} + $p50" | bc -l)
}
for r in $(seq 1 "$K"); do
  echo "== round $r/$K: saturation ($C connections, ${D}s each), then one connection (${D}s each); redis: $REDIS"
  run direct "http://$MOCK/v1/chat/completions" "$C" 2
  run floor "http://$FLOOR/v1/chat/completions" "$C" 2
  run gateway "http://$GW/v1/chat/completions" "$C" 2
  [ $TRACE = 0 ] || run traced "http://$GWT/v1/chat/completions" "$C" 2
  run direct1 "http://$MOCK/v1/chat/completions" 1 1
  run floor1 "http://$FLOOR/v1/chat/completions" 1 1
  run gateway1 "http://$GW/v1/chat/completions" 1 1
  [ $TRACE = 0 ] || run traced1 "http://$GWT/v1/chat/completions" 1 1
done
echo "== result (means over $K rounds)"
echo "${SUM[gateway.rps]} ${SUM[floor.rps]} ${SUM[direct.rps]}" | awk '{printf "  throughput at saturation: gateway/floor = %.3f (target >= 0.95), floor/direct = %.3f\n", $1/$2, $2/$3}'
echo "${SUM[gateway1.p50]} ${SUM[floor1.p50]} ${SUM[direct1.p50]} $K" | awk '{printf "  p50 one at a time: gateway - floor = %+.0f us (target <= 25 us), floor - direct = %+.0f us\n", ($1-$2)/$4, ($2-$3)/$4}'
if [ $TRACE = 1 ]; then
  echo "${SUM[traced.rps]} ${SUM[gateway.rps]} ${SUM[traced1.p50]} ${SUM[gateway1.p50]} $K" | awk '{printf "  tracing on (every span exported): throughput traced/untraced = %.3f, p50 one at a time traced - untraced = %+.0f us\n", $1/$2, ($3-$4)/$5}'
  dropped=$(curl -sf "http://$GWT/metrics" | awk '/^switchyard_tracing_spans_dropped_total/ {s+=$2} END {print s+0}')
  exported=$(curl -sf "http://$GWT/metrics" | awk '/^switchyard_tracing_spans_exported_total/ {s+=$2} END {print s+0}')
  echo "  spans exported=$exported dropped=$dropped"
fi
