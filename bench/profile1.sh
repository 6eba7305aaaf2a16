#!/usr/bin/env bash
# Profiles one request at a time (SPEC 16's one-at-a-time figure): the
# gateway (one team with RPM and TPM in Redis, built with -tags pprof) and
# the GCRA floor (bench/floorproxy -pprof) against `switchyard mockllm`
# and redis-server on loopback, wrk -c1, phases interleaved over ROUNDS.
# Prints per phase the p50, CPU per request of the process and of Redis;
# in the first round it takes a CPU profile of each, and at the end prints,
# per request, the CPU both spent under the functions that explain the gap
# (the HTTP handler path, the Redis call, net/http's background read, the
# transport's loops, the scheduler). Profiles stay in OUT for go tool pprof.
# Bounded: each phase runs for a fixed time; every process it starts is
# stopped on exit.
#
#   bench/profile1.sh [-d SECONDS] [-k ROUNDS] [-o OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
D=6; K=3; O=$(mktemp -d)
while getopts "d:k:o:" o; do case $o in d) D=$OPTARG;; k) K=$OPTARG;; o) O=$OPTARG;; *) exit 2;; esac; done
for c in wrk redis-server; do command -v $c >/dev/null || { echo "profile1: needs $c"; exit 1; }; done
mkdir -p "$O"
MOCK=127.0.0.1:19021; GW=127.0.0.1:19022; FLOOR=127.0.0.1:19023; RPORT=19024; GWP=127.0.0.1:19025; FLP=127.0.0.1:19026
. bench/lib.sh
ports_free 19021 19022 19023 19024 19025 19026
pids=()
cleanup() { stop_started; }
trap cleanup EXIT
echo "building (gateway with -tags pprof)..."
go build -tags pprof -o "$O/switchyard" ./cmd/switchyard
go build -o "$O/floorproxy" ./bench/floorproxy
"$O/switchyard" mockllm -listen $MOCK -ttfb 0s -tps 100000 2>"$O/mock.log" & pids+=($!)
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null & RP=$!; pids+=($RP)
"$O/floorproxy" -listen $FLOOR -upstream "http://$MOCK" -redis 127.0.0.1:$RPORT -limiter gcra -pprof $FLP 2>"$O/floor.log" & FP=$!; pids+=($FP)
cat > "$O/gw.yaml" <<YAML
server: {listen: "$GW"}
data_dir: ""
redis: {url: "redis://127.0.0.1:$RPORT/0", key_prefix: "p1:"}
providers: [{name: mock, kind: openai, base_url: "http://$MOCK/v1", api_key: "x"}]
deployments: [{id: mock-1, model: bench, provider: mock}]
routing: {session_keeping: false}
teams:
  - {name: bench, keys: ["sk-bench"], models: ["*"], rpm: 100000000, tpm: 100000000000}
YAML
PPROF_ADDR=$GWP "$O/switchyard" serve -config "$O/gw.yaml" 2>"$O/gw.log" & GP=$!; pids+=($GP)
for _ in $(seq 300); do
  curl -sf "http://$GW/healthz" >/dev/null && curl -sf "http://$MOCK/healthz" >/dev/null && break; sleep 0.1
done
cp bench/post.lua "$O/post.lua"
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)
for u in $GW $FLOOR; do wrk -t1 -c1 -d2s -s "$O/post.lua" "http://$u/v1/chat/completions" >/dev/null; done
declare -A N
for r in $(seq "$K"); do
  for ph in floor gateway direct; do
    case $ph in
      gateway) U=$GW; P=$GP; PP=$GWP;;
      floor) U=$FLOOR; P=$FP; PP=$FLP;;
      direct) U=$MOCK; P=""; PP="";;
    esac
    prof=""
    if [ "$r" = 1 ] && [ -n "$PP" ]; then
      curl -s "http://$PP/debug/pprof/profile?seconds=$D" > "$O/$ph.pb" & prof=$!
    fi
    c0=0; [ -z "$P" ] || c0=$(cpu "$P"); r0=$(cpu $RP)
    read -r _ n _ _ p50 _ < <(wrk -t1 -c1 -d"${D}s" -s "$O/post.lua" "http://$U/v1/chat/completions" | grep RESULT)
    c1=0; [ -z "$P" ] || c1=$(cpu "$P"); r1=$(cpu $RP)
    [ -z "$prof" ] || wait "$prof"
    [ "$r" = 1 ] && N[$ph]=$n
    printf "  round %d %-8s p50=%6.0f us  cpu/req=%4d us  redis-cpu/req=%3d us\n" "$r" "$ph" "$p50" \
      $(( (c1 - c0) * 1000000 / tck / n )) $(( (r1 - r0) * 1000000 / tck / n ))
  done
done
# per request (profile samples / requests in the profiled phase), by function, cumulative
fns='net/http.(*conn).serve|switchyard/gateway.(*call).parse|switchyard/edge.(*Redis).Begin|switchyard/gateway.(*call).attempt|switchyard/gateway.(*call).finish|net/http/httputil.(*ReverseProxy).ServeHTTP|net/http.(*persistConn).writeLoop|net/http.(*persistConn).readLoop|net/http.(*connReader).startBackgroundRead|net/http.(*connReader).abortPendingRead|github.com/redis/go-redis/v9.(*Script).Run|switchyard/edge.(*writer).run|runtime.findRunnable|runtime.gcBgMarkWorker|runtime.futex|syscall.write|syscall.read'
echo "== CPU per request by function (cumulative, from the round-1 profiles; us)"
printf "  %-55s %8s %8s\n" function floor gateway
for ph in floor gateway; do
  bin="$O/floorproxy"; [ $ph = gateway ] && bin="$O/switchyard"
  go tool pprof -top -cum -nodecount=5000 -nodefraction=0 "$bin" "$O/$ph.pb" 2>/dev/null |
    awk -v n="${N[$ph]}" -v ph=$ph 'NF >= 6 && $4 ~ /^[0-9.]+(ms|s)$/ { v = $4; if (v ~ /ms$/) { sub(/ms$/, "", v); v /= 1000 } else sub(/s$/, "", v); print ph, $6, v * 1e6 / n }'
done > "$O/cum.txt"
IFS='|' read -ra want <<< "$fns"
for f in "${want[@]}"; do
  awk -v f="$f" '$2 == f { v[$1] = $3 } END { printf "  %-55s %8.1f %8.1f\n", f, v["floor"], v["gateway"] }' "$O/cum.txt"
done
echo "profiles: $O/floor.pb $O/gateway.pb (go tool pprof -top -cum BINARY PROFILE)"
