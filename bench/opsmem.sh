#!/usr/bin/env bash
# The memory of a 10,000-team node (SPEC 16: under 150 MB RSS) while it is
# run as an operator runs it: under load (wrk, 50 connections), scraped by a
# Prometheus every 15 s, and read by the console's pages (the teams page
# asks GET /admin/teams every 2 s; the usage page asks GET /admin/usage three
# times every 15 s, once per grouping). It prints the node's peak resident
# set (VmHWM) after each phase:
#   load     the load alone (the figure bench/overhead.sh -m measures)
#   scrape   the load and a scrape every 15 s
#   teams    and the teams page
#   usage    and the usage page
# and the time each kind of ask took (median and slowest; two of the usage
# page's three asks share the first one's read). Phases run in that order, so
# each peak includes the ones before it. Loopback only, bounded: every
# phase runs for a fixed time and every process it starts is stopped on
# exit, by its pid.
#
#   bench/opsmem.sh [-d SECONDS per phase, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
D=30
while getopts "d:" o; do case $o in d) D=$OPTARG;; *) exit 2;; esac; done
for c in wrk redis-server curl; do command -v $c >/dev/null || { echo "bench: needs $c"; exit 1; }; done

out=$(mktemp -d); pids=()
. bench/lib.sh
cleanup() { stop_started; rm -rf "$out"; }
trap cleanup EXIT
echo "building..."
go build -o "$out/switchyard" ./cmd/switchyard

MOCK=127.0.0.1:19101; GW=127.0.0.1:19102; RPORT=19104; ADMIN=sk-admin-opsmem-0123456789
ports_free 19101 19102 19104
"$out/switchyard" mockllm -listen $MOCK -ttfb 0s -tps 100000 2>"$out/mock.log" & pids+=($!)
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null & pids+=($!)
{
  cat <<YAML
server: {listen: "$GW"}
data_dir: ""
redis: {url: "redis://127.0.0.1:$RPORT/0"}
admin: {key: "$ADMIN"}
providers: [{name: mock, kind: openai, base_url: "http://$MOCK/v1", api_key: "x"}]
deployments: [{id: mock-1, model: bench, provider: mock}, {id: mock-2, model: bench, provider: mock}]
teams:
YAML
  awk 'BEGIN { for (i = 0; i < 10000; i++) printf "  - {name: t%d, keys: [\"sk-t%d\"], models: [\"*\"], rpm: 100000000, tpm: 100000000000}\n", i, i }'
} > "$out/gw.yaml"
"$out/switchyard" serve -config "$out/gw.yaml" 2>"$out/gw.log" & G=$!; pids+=($G)
for _ in $(seq 1 300); do curl -sf "http://$GW/healthz" >/dev/null && curl -sf "http://$MOCK/healthz" >/dev/null && break; sleep 0.1; done

# the request: one of 100,000 sessions at random, with its team's key
many_lua "$out/many.lua"
hwm() { awk '/^VmHWM/ {printf "%.0f MB", $2/1024}' "/proc/$G/status"; }
# ask URL FILE: one timed ask, its milliseconds appended to FILE
ask() { curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $ADMIN" "http://$GW$1" | awk '{printf "%.0f\n", $1*1000}' >> "$2"; }
med() { [ -s "$1" ] && sort -n "$1" | awk '{a[NR]=$1} END {print "median " a[int((NR+1)/2)] " ms, slowest " a[NR] " ms"}' || echo "-"; }

echo "warm-up: ${D}s of load (every team and most sessions live)"
wrk -t2 -c50 -d"${D}s" -s "$out/many.lua" "http://$GW/v1/chat/completions" >/dev/null
# phase NAME SCRAPE TEAMS USAGE: D seconds of load with the asks switched on
phase() {
  wrk -t2 -c50 -d"${D}s" -s "$out/many.lua" "http://$GW/v1/chat/completions" > "$out/wrk.txt" & local W=$!
  local i=0 start=$SECONDS
  while kill -0 $W 2>/dev/null; do # the asks run while the load does, a second apart
    i=$((SECONDS - start))
    [ "$2" = 1 ] && [ $((i % 15)) = 0 ] && ask /metrics "$out/t.metrics"
    [ "$3" = 1 ] && [ $((i % 2)) = 0 ] && ask /admin/teams "$out/t.teams"
    if [ "$4" = 1 ] && [ $((i % 15)) = 0 ]; then
      for g in day,model team,key team,user; do ask "/admin/usage?group_by=$g" "$out/t.usage"; done
    fi
    sleep 1
  done
  wait $W || true
  printf '  %-7s peak RSS %s  (%s requests/s)\n' "$1" "$(hwm)" "$(awk '/^Requests\/sec/ {print $2}' "$out/wrk.txt")"
}
phase load 0 0 0
phase scrape 1 0 0
phase teams 1 1 0
phase usage 1 1 1
echo "  asks under load: /metrics $(med "$out/t.metrics"); /admin/teams $(med "$out/t.teams"); /admin/usage $(med "$out/t.usage")"
