#!/usr/bin/env bash
# Measures the gateway's overhead on loopback (SPEC 16), every figure as a
# ratio against a baseline measured in the same run: `wrk` against
# `switchyard mockllm` directly, through a bare httputil.ReverseProxy (the
# floor; with -r it makes one Redis EVALSHA per request of SPEC 16's GCRA
# script, and a second floor, "cfloor", runs the older fixed-window counter
# beside it) and through the gateway (with -r its team limits live in
# Redis). Phases are interleaved
# over several rounds to spread the machine's noise. With -t a second
# gateway with tracing on (sample_ratio 1, every span exported to a
# discarding OTLP sink, bench/otlpsink) runs beside the first, and its
# figures are reported as ratios against the untraced gateway. Bounded: each
# phase runs for a fixed time; every process it starts is stopped on exit.
#
# With -r it also prints, per phase, the Redis commands per request by type
# (INFO commandstats before and after; scripts' inner commands included),
# the time Redis spent executing scripts per call and per request (the
# admission script's own cost, inner commands included, against the
# floor's; commandstats' usec, so not Redis's event loop and I/O), and
# CPU per request of the gateway, the floor and Redis (utime+stime from
# /proc). Before the rounds every gateway runs one unmeasured warm-up phase.
# At the end it prints each process's peak and current resident memory.
# With -m a third gateway has 10,000 teams and its requests are spread over
# 100,000 live sessions, ten per team (two deployments and session keeping
# on in the gateway it is compared with and in it, so pins are read and
# written): SPEC 16's "cost stays flat" figure. Its one-team side is the
# "one" phases: the first gateway, sent the 10,000-team phases' own wrk
# script with a single session (bench/lib.sh many_lua), so wrk, which
# shares the CPUs, does the same work a request on both sides ("gateway",
# whose request wrk formats once, is also printed against it). The
# 10,000-team gateway holds each
# team's usage up to 10 s before sending it, so after each of its phases the
# script waits 11 s (no other phase pays that flush) and prints the flush's
# CPU beyond an idle window measured once after the warm-up. Results are medians of the interleaved rounds;
# a last line gives the medians of each round's own ratio (paired), which
# the machine's drift between rounds does not skew, and one more their
# lowest and highest (spread): how far a single round's figure moves here. Each round starts its
# phases at a different one, so no phase always follows the same other.
#
# With -h a gateway with the response cache on (SPEC 18) runs beside the
# first: "cached" phases send one request over and over (every one after the
# first a hit), "unique" phases send a different request each time to it
# (every one a cacheable miss, stored) and "unique0" the same to the first
# gateway (cache off), so SPEC 16's two cache figures are printed: a hit
# against the floor, and a miss against the same request with the cache off.
#
# With -h and -r two more baselines run: the miss floor (bench/floorproxy
# -cache), the floor plus the least a cacheable miss of SPEC 18 can cost
# (the body hashed, the entry read and the coalescing lease taken in the
# floor's one script, the answer written by a pipelining writer; no local
# copy, no canonical form, no rendering), and the same without the lease.
# Their "munique" and "munique0" phases send the unique requests to them,
# "funique" to the floor, so the line "miss floor" says what the 5% target
# leaves to any implementation of section 18 on this machine.
#
# With -l a gateway has one team with 100,000 keys, each with limits of its
# own, and user_limits for its end users (SPEC 3.1: every request meets
# three levels): "lvone" phases send one key and one end user, "lvmany"
# phases a random one of the 100,000 keys and of 100,000 end users each
# time, so SPEC 16's figure for levels is printed: throughput and overhead
# one at a time with 100,000 keys and users against one of each, on the same
# gateway, and its memory.
#
# With -g SIZE every gateway runs with server.memory_limit SIZE (the Go
# runtime's soft limit, e.g. 128MiB), as "auto" would give it in a
# container with a limit of SIZE/0.9; without it the gateways run with the
# default ("auto": no limit on a machine without a cgroup limit). With -p
# PERCENT every gateway runs with server.gc_percent PERCENT (default 100).
# With -P MODE every gateway runs with server.procs MODE (default adaptive:
# one P while a gateway is mostly idle, as in the one-at-a-time phases;
# "auto" runs them on the Go runtime's default of Ps, as the floor runs).
#
#   bench/overhead.sh [-d SECONDS] [-c CONCURRENCY] [-k ROUNDS] [-r] [-t] [-m] [-h] [-l] [-g SIZE] [-p PERCENT] [-P MODE]
set -euo pipefail
cd "$(dirname "$0")/.."
D=5; C=50; K=3; REDIS=0; TRACE=0; MANY=0; HITS=0; LEVELS=0; MEMLIMIT=auto; GCP=100; PROCS=adaptive
while getopts "d:c:k:rtmhlg:p:P:" o; do case $o in d) D=$OPTARG;; c) C=$OPTARG;; k) K=$OPTARG;; r) REDIS=1;; t) TRACE=1;; m) MANY=1;; h) HITS=1;; l) LEVELS=1;; g) MEMLIMIT=$OPTARG;; p) GCP=$OPTARG;; P) PROCS=$OPTARG;; *) exit 2;; esac; done
command -v wrk >/dev/null || { echo "bench: needs wrk (apt-get install -y wrk)"; exit 1; }
[ $REDIS = 0 ] || command -v redis-server >/dev/null || { echo "bench: -r needs redis-server"; exit 1; }

out=$(mktemp -d); pids=(); RPID=""
. bench/lib.sh
cleanup() { stop_started; rm -rf "$out"; }
trap cleanup EXIT
echo "building..."
go build -o "$out/switchyard" ./cmd/switchyard
go build -o "$out/floorproxy" ./bench/floorproxy
go build -o "$out/alternate" ./bench/alternate
[ $TRACE = 0 ] || go build -o "$out/otlpsink" ./bench/otlpsink

MOCK=127.0.0.1:19001; GW=127.0.0.1:19002; FLOOR=127.0.0.1:19003; RPORT=19004; GWT=127.0.0.1:19005; SINK=127.0.0.1:19006; GWM=127.0.0.1:19007; CFLOOR=127.0.0.1:19008; GWC=127.0.0.1:19009; GWL=127.0.0.1:19010; GWL2=127.0.0.1:19011; MFLOOR=127.0.0.1:19012; MFLOOR0=127.0.0.1:19013
ports_free 19001 19002 19003 19004 19005 19006 19007 19008 19009 19010 19011 19012 19013
"$out/switchyard" mockllm -listen $MOCK -ttfb 0s -tps 100000 2>"$out/mock.log" & pids+=($!)
redis_yaml=""; floor_redis=""; limits=""
if [ $REDIS = 1 ]; then
  redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --loglevel warning & RPID=$!; pids+=($RPID)
  redis_yaml="redis: {url: \"redis://127.0.0.1:$RPORT/0\"}"
  floor_redis="-redis 127.0.0.1:$RPORT"
  limits=", rpm: 100000000, tpm: 100000000000"
fi
"$out/floorproxy" -listen $FLOOR -upstream "http://$MOCK" $floor_redis -limiter gcra 2>"$out/floor.log" & FLOORPID=$!; pids+=($FLOORPID)
CFLOORPID=""
if [ $REDIS = 1 ]; then
  "$out/floorproxy" -listen $CFLOOR -upstream "http://$MOCK" $floor_redis -limiter counter 2>"$out/cfloor.log" & CFLOORPID=$!; pids+=($CFLOORPID)
fi
MFLOORPID=""; MFLOOR0PID=""
if [ $REDIS = 1 ] && [ $HITS = 1 ]; then
  "$out/floorproxy" -listen $MFLOOR -upstream "http://$MOCK" $floor_redis -cache 2>"$out/mfloor.log" & MFLOORPID=$!; pids+=($MFLOORPID)
  "$out/floorproxy" -listen $MFLOOR0 -upstream "http://$MOCK" $floor_redis -cache -lease=false 2>"$out/mfloor0.log" & MFLOOR0PID=$!; pids+=($MFLOOR0PID)
fi
deps="deployments: [{id: mock-1, model: bench, provider: mock}]"; routing="routing: {session_keeping: false}"
if [ $MANY = 1 ]; then
  deps="deployments: [{id: mock-1, model: bench, provider: mock}, {id: mock-2, model: bench, provider: mock}]"; routing=""
fi
gwyaml() { # listen-address teams-file
  cat <<YAML
server: {listen: "$1", memory_limit: "$MEMLIMIT", gc_percent: $GCP, procs: "$PROCS"}
data_dir: ""
$redis_yaml
providers: [{name: mock, kind: openai, base_url: "http://$MOCK/v1", api_key: "x"}]
$deps
$routing
teams:
YAML
  cat "$2"
}
# with -m the team also has key sk-t0: the one-team side of the 10,000-team
# figure sends it (many_lua's script with one session; see "one" below)
k1='"sk-bench"'; [ $MANY = 0 ] || k1='"sk-bench", "sk-t0"'
echo "  - {name: bench, keys: [$k1], models: [\"*\"]$limits}" > "$out/team1"
gwyaml "$GW" "$out/team1" > "$out/gw.yaml"
"$out/switchyard" serve -config "$out/gw.yaml" 2>"$out/gw.log" & GWPID=$!; pids+=($GWPID)
GWMPID=""
if [ $MANY = 1 ]; then
  awk -v l="$limits" 'BEGIN { for (i = 0; i < 10000; i++) printf "  - {name: t%d, keys: [\"sk-t%d\"], models: [\"*\"]%s}\n", i, i, l }' > "$out/teams"
  # its own key prefix: the catalog (teams included) stored by the first gateway is not its
  rm=""; [ $REDIS = 0 ] || rm="redis: {url: \"redis://127.0.0.1:$RPORT/0\", key_prefix: \"many:\"}"
  redis_yaml="$rm" gwyaml "$GWM" "$out/teams" > "$out/gwm.yaml"
  "$out/switchyard" serve -config "$out/gwm.yaml" 2>"$out/gwm.log" & GWMPID=$!; pids+=($GWMPID)
fi
GWLPID=""
if [ $LEVELS = 1 ]; then
  # one team, 100,000 keys with limits of their own, user_limits: every
  # request meets three levels (limits too high to bind). The file is JSON, as a generated file of
  # 100,000 keys would be: the YAML parser's document tree alone would
  # take the node's start past 150 MB (README, "Configuration")
  lim='"rpm": 100000000, "tpm": 100000000000'
  tl=""; [ -z "$limits" ] || tl=", $lim"
  rl=""; [ $REDIS = 0 ] || rl="\"redis\": {\"url\": \"redis://127.0.0.1:$RPORT/0\", \"key_prefix\": \"levels:\"},"
  dl='{"id": "mock-1", "model": "bench", "provider": "mock"}'
  [ $MANY = 0 ] || dl="$dl, "'{"id": "mock-2", "model": "bench", "provider": "mock"}'
  rt=""; [ $MANY = 1 ] || rt='"routing": {"session_keeping": false},'
  { printf '{"server": {"listen": "%s", "memory_limit": "%s", "gc_percent": %s, "procs": "%s"}, "data_dir": "", %s\n' "$GWL" "$MEMLIMIT" "$GCP" "$PROCS" "$rl"
    printf ' "providers": [{"name": "mock", "kind": "openai", "base_url": "http://%s/v1", "api_key": "x"}],\n' "$MOCK"
    printf ' "deployments": [%s], %s\n' "$dl" "$rt"
    printf ' "teams": [{"name": "lv", "models": ["*"]%s, "user_limits": {%s}, "keys": [\n' "$tl" "$lim"
    awk -v l="$lim" 'BEGIN { for (i = 0; i < 100000; i++) printf "  %s{\"key\": \"sk-k%d\", \"name\": \"k%d\", %s}\n", (i ? "," : ""), i, i, l }'
    echo ']}]}'
  } > "$out/gwl.json"
  "$out/switchyard" serve -config "$out/gwl.json" 2>"$out/gwl.log" & GWLPID=$!; pids+=($GWLPID)
  # a second node of the same configuration, for the duo (both sides at
  # once need a process each: in one they would share its queue), started
  # once the first is up: in the one run that started both at once, the
  # first peaked at 156 MB (134-141 MB in every run before), which the two
  # starts competing for the CPUs may explain
  for _ in $(seq 1 300); do curl -sf "http://$GWL/healthz" >/dev/null && break; sleep 0.1; done
  sed -e "s/\"listen\": \"$GWL\"/\"listen\": \"$GWL2\"/" "$out/gwl.json" > "$out/gwl2.json"
  "$out/switchyard" serve -config "$out/gwl2.json" 2>"$out/gwl2.log" & pids+=($!)
fi
GWCPID=""
if [ $HITS = 1 ]; then
  { sed -e "s/listen: \"$GW\"/listen: \"$GWC\"/" "$out/gw.yaml"; echo "cache: {enabled: true, max_local_bytes: 268435456}"; } > "$out/gwc.yaml"
  [ $REDIS = 0 ] || sed -i -e 's/redis: {url: "\([^"]*\)"}/redis: {url: "\1", key_prefix: "cached:"}/' "$out/gwc.yaml"
  "$out/switchyard" serve -config "$out/gwc.yaml" 2>"$out/gwc.log" & GWCPID=$!; pids+=($GWCPID)
fi
if [ $TRACE = 1 ]; then
  "$out/otlpsink" -listen $SINK 2>"$out/sink.log" & pids+=($!)
  sed -e "s/listen: \"$GW\"/listen: \"$GWT\"/" "$out/gw.yaml" > "$out/gwt.yaml"
  echo "tracing: {otlp_endpoint: \"http://$SINK\", sample_ratio: 1.0}" >> "$out/gwt.yaml"
  "$out/switchyard" serve -config "$out/gwt.yaml" 2>"$out/gwt.log" & pids+=($!)
fi
for i in $(seq 1 300); do
  curl -sf "http://$GW/healthz" >/dev/null && curl -sf "http://$MOCK/healthz" >/dev/null &&
    { [ $TRACE = 0 ] || curl -sf "http://$GWT/healthz" >/dev/null; } &&
    { [ $MANY = 0 ] || curl -sf "http://$GWM/healthz" >/dev/null; } &&
    { [ $HITS = 0 ] || curl -sf "http://$GWC/healthz" >/dev/null; } &&
    { [ $LEVELS = 0 ] || { curl -sf "http://$GWL/healthz" >/dev/null && curl -sf "http://$GWL2/healthz" >/dev/null; }; } && break; sleep 0.1
done

cp bench/post.lua "$out/post.lua"
# the many-teams variant: each request is one of 100,000 sessions at
# random, sent with the key of the team that session belongs to (session s
# is team s mod 10,000's: a session id is scoped by its team, so pairing a
# random team with a random id would make nearly every request a session
# never seen before, millions of them, not 100,000 live ones). The gateway
# it is compared with has one of each. manywarm.lua visits every session
# once, in order, so all are live before the first round.
sed -e 's/^wrk.headers\["Authorization"\].*$//' "$out/post.lua" > "$out/manywarm.lua"
many_lua "$out/many.lua"
# onedyn.lua: the same script with one session (s0, team key sk-t0): the
# one-team side of the 10,000-team figure ("one" and "one1" phases, the
# duo), so wrk does the same work for both; "gateway" keeps the request
# formatted once, as the floor's phases do, for the floor figures
many_lua "$out/onedyn.lua" 0
cat >> "$out/manywarm.lua" <<'LUA'
local threads = 0
setup = function(thread) thread:set("seq", threads); threads = threads + 1 end
request = function()
  local s = seq % 100000
  seq = seq + 2 -- the warm-up runs two threads: each takes every other session
  wrk.headers["Authorization"] = "Bearer sk-t" .. (s % 10000)
  wrk.headers["X-Session-Id"] = "s" .. s
  return wrk.format()
end
LUA
# unique.lua: a different request each time (a cacheable miss every time)
cp "$out/post.lua" "$out/unique.lua"
cat >> "$out/unique.lua" <<'LUA'
counter = 0
init = function() tid = tostring({}) end -- a table's address: different in each thread
request = function()
  counter = counter + 1
  wrk.body = string.format('{"model":"bench","messages":[{"role":"user","content":"hello %s %d"}],"max_tokens":16}', tid, counter)
  return wrk.format()
end
LUA
# lvone.lua: one key and one end user; lvmany.lua: one of 100,000 keys and
# one of 100,000 end users at random, each request. Both build each request
# in Lua the same way (lvone draws from 0..0), so wrk, which shares the
# machine, does the same work in both and the ratio is the gateway's: a
# request wrk formats once costs it about 2 us less than one request() makes
cp "$out/post.lua" "$out/lvone.lua"
cp "$out/post.lua" "$out/lvmany.lua"
for f in lvone:0 lvmany:99999; do
  cat >> "$out/${f%%:*}.lua" <<LUA
request = function()
  wrk.headers["Authorization"] = "Bearer sk-k" .. math.random(0, ${f#*:})
  wrk.headers["X-Switchyard-User"] = "u" .. math.random(0, ${f#*:})
  return wrk.format()
end
LUA
done
one="$out/post.lua"
if [ $MANY = 1 ]; then
  sed -e 's/^done = /wrk.headers["X-Session-Id"] = "s1"\ndone = /' "$out/post.lua" > "$out/one.lua"; one="$out/one.lua"
fi
# warm-up, not measured: the many-teams gateway's 100,000 sessions become
# live (pinned in Redis and in its bounded local store: 24 s covers them
# all at 4,200 requests/s) and every process reaches its steady state
# before the first round, so round 1 does not measure a cold start
echo "== warm-up (${D}s per gateway, 24s for the many-teams one; not measured)"
wrk -t2 -c"$C" -d"${D}s" -s "$one" "http://$GW/v1/chat/completions" >/dev/null 2>&1
[ $LEVELS = 0 ] || wrk -t2 -c"$C" -d"${D}s" -s "$out/lvmany.lua" "http://$GWL/v1/chat/completions" >/dev/null 2>&1
[ $LEVELS = 0 ] || wrk -t2 -c"$C" -d"${D}s" -s "$out/lvone.lua" "http://$GWL2/v1/chat/completions" >/dev/null 2>&1
if [ $MANY = 1 ]; then
  wrk -t2 -c"$C" -d24s -s "$out/manywarm.lua" "http://$GWM/v1/chat/completions" > "$out/warm.txt" 2>&1
  read -r _ warmed _ < <(grep RESULT "$out/warm.txt")
  [ "${warmed:-0}" -ge 100000 ] || echo "  warning: the warm-up reached ${warmed:-0} of the 100,000 sessions; the first rounds write the rest"
fi
declare -A SUM
cpu() { [ -n "${1:-}" ] && awk '{print $14 + $15}' "/proc/$1/stat" || echo 0; }
# HOLD is how long a many phase's after-effects are waited out: the
# 10,000-team gateway's writer holds each team's usage up to 10 s (edge's
# defaultUsageEvery) and then sends it, so run at once the next phases would
# pay that flush (its CPU and Redis's). IDLEG and IDLER are the CPU ticks the
# 10,000-team gateway and Redis use in HOLD seconds with no load at all
# (timers, heartbeats, Redis's expiry cycle), measured once after the
# warm-up's own usage went out; a phase's deferred cost is what it adds to that
# (its commands fall between two phases' snapshots and count in neither).
HOLD=11; IDLEG=0; IDLER=0
if [ $MANY = 1 ]; then
  sleep $HOLD
  ig=$(cpu "$GWMPID"); ir=$(cpu "$RPID"); sleep $HOLD
  IDLEG=$(($(cpu "$GWMPID") - ig)); IDLER=$(($(cpu "$RPID") - ir))
  echo "  idle for ${HOLD}s: 10,000-team gateway $((IDLEG * 1000 / $(getconf CLK_TCK))) ms CPU, Redis $((IDLER * 1000 / $(getconf CLK_TCK))) ms"
fi
cstats() { [ $REDIS = 1 ] && redis-cli -p $RPORT info commandstats | tr -d '\r' | sed -n 's/^cmdstat_\([a-z|]*\):calls=\([0-9]*\),usec=\([0-9]*\).*/\1 \2 \3/p' || true; }
run() { # name url connections threads [script] [pid whose CPU to count]
  local script="${5:-$out/post.lua}" before after cpu0 cpu1
  before=$(cstats); cpu0=$(cpu "${6:-}"); rcpu0=$(cpu "$RPID")
  wrk -t"$4" -c"$3" -d"${D}s" -s "$script" "$2" > "$out/$1.txt" 2>&1
  cpu1=$(cpu "${6:-}"); rcpu1=$(cpu "$RPID"); after=$(cstats)
  read -r _ n errs rps p50 p99 < <(grep RESULT "$out/$1.txt")
  printf "  %-9s rps=%-8.0f p50=%-8sus p99=%-8sus requests=%s errors=%s" "$1" "$rps" "$p50" "$p99" "$n" "$errs"
  if [ -n "${6:-}" ]; then
    local c; c=$(echo "($cpu1 - $cpu0) * 1000000 / $(getconf CLK_TCK) / $n" | bc -l)
    printf " cpu/req=%.0fus" "$c"; SUM[$1.cpu]="${SUM[$1.cpu]:-} $c"
  fi
  if [ "${1#many}" != "$1" ]; then
    # wait out this phase's held usage (HOLD above); what its flush cost
    # beyond idling is printed as the phase's deferred CPU per request
    local dg0 dr0; dg0=$(cpu "${6:-}"); dr0=$(cpu "$RPID")
    sleep $HOLD
    local dg; dg=$(echo "($(cpu "${6:-}") - $dg0 - $IDLEG) * 1000000 / $(getconf CLK_TCK) / $n" | bc -l)
    local dr; dr=$(echo "($(cpu "$RPID") - $dr0 - $IDLER) * 1000000 / $(getconf CLK_TCK) / $n" | bc -l)
    printf " deferred beyond idle: cpu/req=%.1fus redis-cpu/req=%.1fus" "$dg" "$dr"
    SUM[$1.dcpu]="${SUM[$1.dcpu]:-} $dg"; SUM[$1.drcpu]="${SUM[$1.drcpu]:-} $dr"
  fi
  if [ $REDIS = 1 ]; then
    local rc; rc=$(echo "($rcpu1 - $rcpu0) * 1000000 / $(getconf CLK_TCK) / $n" | bc -l)
    printf " redis-cpu/req=%.0fus" "$rc"; SUM[$1.rcpu]="${SUM[$1.rcpu]:-} $rc"
    # per command: name, calls and usec before, calls and usec after
    local d; d=$(join -a2 -e0 -o 0,1.2,1.3,2.2,2.3 <(echo "$before" | sort) <(echo "$after" | sort))
    printf " redis/req:"
    echo "$d" | awk -v n="$n" '$1 != "info" && ($4 - $2) / n >= 0.005 { printf " %s=%.2f", $1, ($4 - $2) / n }'
    local sc su; read -r sc su < <(echo "$d" | awk '$1 == "evalsha" || $1 == "eval" { c += $4 - $2; u += $5 - $3 } END { print c + 0, u + 0 }')
    [ "$sc" = 0 ] || printf " script-us/call=%.1f script-us/req=%.1f" "$(echo "$su / $sc" | bc -l)" "$(echo "$su / $n" | bc -l)"
    SUM[$1.sus]="${SUM[$1.sus]:-} $(echo "$su / $n" | bc -l)"
  fi
  echo
  SUM[$1.rps]="${SUM[$1.rps]:-} $rps"; SUM[$1.p50]="${SUM[$1.p50]:-} $p50"
}
med() { echo "${SUM[$1]:-0}" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# paired OP A B [C]: the median over rounds of one round's A/B ("ratio"),
# A-B ("diff") or (A-C)/(B-C) ("overhead"): each round's phases ran seconds
# apart, so a pair cancels the machine's drift between rounds, which the
# ratio of two medians does not.
paired() {
  rounds "$@" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
# rounds OP A B [C]: each round's own value of paired's OP, sorted.
rounds() {
  local op=$1 files=() i=0; shift
  for k in "$@"; do
    i=$((i + 1)); echo "${SUM[$k]:-0}" | tr ' ' '\n' | grep . > "$out/paired.$i"; files+=("$out/paired.$i")
  done
  paste "${files[@]}" | awk -v op="$op" '{ if (op == "ratio") print $1 / $2; else if (op == "diff") print $1 - $2; else print ($1 - $3) / ($2 - $3) }' | sort -g
}
# spread OP A B [C]: the lowest and highest of the rounds' own values: how
# far one round's figure moves on this machine, beside the medians.
spread() { rounds "$@" | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.3g..%.3g", lo, hi}'; }
# The phases of a group, as run arguments; a round starts each group at a
# different phase (round r at phase r mod n), so every phase runs in every
# position equally often: a phase always run right after another would
# share that one's after-effects (its GC, its writer's last flush: the
# floor's phase saw the gateway's audit XADDs) in every round, and its
# ratio would carry that bias. A second's pause before each phase lets
# those settle.
sat=("direct http://$MOCK/v1/chat/completions $C 2"
  "floor http://$FLOOR/v1/chat/completions $C 2 $out/post.lua $FLOORPID"
  "gateway http://$GW/v1/chat/completions $C 2 $one $GWPID")
one1=("direct1 http://$MOCK/v1/chat/completions 1 1"
  "floor1 http://$FLOOR/v1/chat/completions 1 1 $out/post.lua $FLOORPID"
  "gateway1 http://$GW/v1/chat/completions 1 1 $one $GWPID")
[ $REDIS = 0 ] || { sat+=("cfloor http://$CFLOOR/v1/chat/completions $C 2 $out/post.lua $CFLOORPID"); one1+=("cfloor1 http://$CFLOOR/v1/chat/completions 1 1 $out/post.lua $CFLOORPID"); }
[ $HITS = 0 ] || { sat+=("cached http://$GWC/v1/chat/completions $C 2 $out/post.lua $GWCPID" "unique http://$GWC/v1/chat/completions $C 2 $out/unique.lua $GWCPID" "unique0 http://$GW/v1/chat/completions $C 2 $out/unique.lua $GWPID"); one1+=("cached1 http://$GWC/v1/chat/completions 1 1 $out/post.lua $GWCPID"); }
[ -z "$MFLOORPID" ] || sat+=("funique http://$FLOOR/v1/chat/completions $C 2 $out/unique.lua $FLOORPID" "munique http://$MFLOOR/v1/chat/completions $C 2 $out/unique.lua $MFLOORPID" "munique0 http://$MFLOOR0/v1/chat/completions $C 2 $out/unique.lua $MFLOOR0PID")
[ $TRACE = 0 ] || { sat+=("traced http://$GWT/v1/chat/completions $C 2"); one1+=("traced1 http://$GWT/v1/chat/completions 1 1"); }
[ $MANY = 0 ] || { sat+=("many http://$GWM/v1/chat/completions $C 2 $out/many.lua $GWMPID" "one http://$GW/v1/chat/completions $C 2 $out/onedyn.lua $GWPID")
  one1+=("many1 http://$GWM/v1/chat/completions 1 1 $out/many.lua $GWMPID" "one1 http://$GW/v1/chat/completions 1 1 $out/onedyn.lua $GWPID"); }
[ $LEVELS = 0 ] || { sat+=("lvone http://$GWL/v1/chat/completions $C 2 $out/lvone.lua $GWLPID" "lvmany http://$GWL/v1/chat/completions $C 2 $out/lvmany.lua $GWLPID")
  one1+=("lvone1 http://$GWL/v1/chat/completions 1 1 $out/lvone.lua $GWLPID" "lvmany1 http://$GWL/v1/chat/completions 1 1 $out/lvmany.lua $GWLPID"); }
rotated() { # round phase...: the phases, starting at phase round mod n
  # (names of its own: run sets globals such as n, and bash scopes dynamically)
  local rot_r=$1; shift; local rot_ph=("$@") rot_n=$# rot_i
  for ((rot_i = 0; rot_i < rot_n; rot_i++)); do
    sleep 1
    # shellcheck disable=SC2086 # each phase is a word list of run arguments
    run ${rot_ph[(rot_i + rot_r) % rot_n]}
  done
}
# alt: one request at a time to every one-connection target in turn, the
# order shuffled each cycle (bench/alternate): the floor, the gateway, the
# mock and, with -m and -l, the 10,000-team and the levels gateways with
# what their wrk phases send (a random team and session, a random key and
# end user). The one-at-a-time figures are then paired request by
# request, so drift between wrk's phases (seconds apart) does not land in
# one side's p50.
sed -n "s/^wrk.body = '\(.*\)'$/\1/p" bench/post.lua > "$out/body.json"
alttargets=(-H "Authorization: Bearer sk-bench" -t "floor=http://$FLOOR/v1/chat/completions"
  -t "gateway=http://$GW/v1/chat/completions" -t "direct=http://$MOCK/v1/chat/completions")
[ $MANY = 0 ] || alttargets+=(-th "gateway=X-Session-Id: s1" -t "many=http://$GWM/v1/chat/completions" -tr many=100000
  -th "many=Authorization: Bearer sk-t{r%10000}" -th "many=X-Session-Id: s{r}")
[ $LEVELS = 0 ] || alttargets+=(-t "lvone=http://$GWL/v1/chat/completions" -th "lvone=Authorization: Bearer sk-k0" -th "lvone=X-Switchyard-User: u0"
  -t "lvmany=http://$GWL/v1/chat/completions" -tr lvmany=100000 -th "lvmany=Authorization: Bearer sk-k{r}" -th "lvmany=X-Switchyard-User: u{s}")
alt() { # round
  sleep 1
  "$out/alternate" -d "${D}s" -seed "$1" -body "$out/body.json" "${alttargets[@]}" > "$out/alt.txt" 2>&1
  local name p50 line="  alt      "
  while read -r _ name _ _ p50 _; do
    SUM[alt.$name]="${SUM[alt.$name]:-} $p50"; line="$line $name p50=${p50}us"
  done < <(grep '^ALT ' "$out/alt.txt")
  read -r _ _ _ p50 pair < <(grep '^PAIR gateway ' "$out/alt.txt")
  SUM[alt.pair]="${SUM[alt.pair]:-} $pair"
  echo "$line (alternating per request); gateway - floor, median of per-request differences: ${pair}us"
}
# duo: the same comparison at saturation, both sides at once: two wrk runs
# of C/2 connections each, one per side, for D seconds. Each side then has
# the machine in the same state (wrk's phases are seconds apart, and one
# round's ratio moved from 0.62 to 1.14 with the same code), and the two
# share its CPUs, so the ratio of their rates is the inverse ratio of what
# a request costs each. Printed beside the phases' ratios, not instead.
duos=()
[ $MANY = 0 ] || duos+=("many http://$GWM/v1/chat/completions $out/many.lua one http://$GW/v1/chat/completions $out/onedyn.lua")
[ $LEVELS = 0 ] || duos+=("lvmany http://$GWL/v1/chat/completions $out/lvmany.lua lvone http://$GWL2/v1/chat/completions $out/lvone.lua")
[ $HITS = 0 ] || duos+=("unique http://$GWC/v1/chat/completions $out/unique.lua unique0 http://$GW/v1/chat/completions $out/unique.lua")
[ -z "$MFLOORPID" ] || duos+=("munique http://$MFLOOR/v1/chat/completions $out/unique.lua funique http://$FLOOR/v1/chat/completions $out/unique.lua")
duo() { # name-a url-a script-a name-b url-b script-b
  sleep 1
  local half=$((C / 2))
  wrk -t1 -c"$half" -d"${D}s" -s "$3" "$2" > "$out/duo.$1.txt" 2>&1 & local wa=$!
  wrk -t1 -c"$half" -d"${D}s" -s "$6" "$5" > "$out/duo.$4.txt" 2>&1 & local wb=$!
  wait $wa $wb
  local ra rb
  read -r _ _ _ ra _ < <(grep RESULT "$out/duo.$1.txt")
  read -r _ _ _ rb _ < <(grep RESULT "$out/duo.$4.txt")
  SUM[duo.$1]="${SUM[duo.$1]:-} $ra"; SUM[duo.$4]="${SUM[duo.$4]:-} $rb"
  printf "  duo      %s rps=%.0f and %s rps=%.0f at once: %.3f\n" "$1" "$ra" "$4" "$rb" "$(echo "$ra / $rb" | bc -l)"
}
for r in $(seq 1 "$K"); do
  echo "== round $r/$K: saturation ($C connections, ${D}s each), then one connection (${D}s each); redis: $REDIS"
  rotated "$r" "${sat[@]}"
  rotated "$r" "${one1[@]}"
  alt "$r"
  for d in "${duos[@]}"; do
    # shellcheck disable=SC2086 # each duo is a word list of duo arguments
    duo $d
  done
done
echo "== result (medians over $K interleaved rounds; the machine is shared: only ratios within a run mean anything; gateways at server.procs $PROCS)"
echo "$(med gateway.rps) $(med floor.rps) $(med direct.rps)" | awk '{printf "  throughput at saturation: gateway/floor = %.3f (target >= 1.0 against the GCRA floor with -r), floor/direct = %.3f\n", $1/$2, $2/$3}'
echo "$(med gateway1.p50) $(med floor1.p50) $(med direct1.p50)" | awk '{printf "  p50 one at a time: gateway - floor = %+.0f us (target <= 25 us), floor - direct = %+.0f us\n", $1-$2, $2-$3}'
echo "$(paired diff alt.gateway alt.floor) $(med alt.pair)" | awk '{printf "  p50 one at a time, alternating per request (bench/alternate): gateway - floor = %+.0f us (median of the rounds; target <= 25 us), median of per-request differences %+.0f us\n", $1, $2}'
[ $REDIS = 0 ] || echo "$(med gateway.rps) $(med cfloor.rps) $(med gateway1.p50) $(med cfloor1.p50) $(med floor.rps) $(med floor1.p50)" |
  awk '{printf "  against the counter floor: throughput gateway/cfloor = %.3f, p50 gateway - cfloor = %+.0f us (GCRA floor/counter floor: %.3f, %+.0f us)\n", $1/$2, $3-$4, $5/$2, $6-$4}'
echo "$(med gateway.cpu) $(med floor.cpu) $(med gateway1.cpu) $(med floor1.cpu)" | awk '{printf "  CPU per request (utime+stime): gateway %.0f us vs floor %.0f us at saturation; %.0f vs %.0f us one at a time\n", $1, $2, $3, $4}'
[ $REDIS = 0 ] || echo "$(med gateway.rcpu) $(med floor.rcpu) $(med many.rcpu)" | awk '{printf "  Redis CPU per request at saturation: gateway %.1f us, floor %.1f us, 10,000 teams %.1f us\n", $1, $2, $3}'
[ $REDIS = 0 ] || echo "$(med gateway1.sus) $(med floor1.sus) $(med gateway.sus) $(med floor.sus) $(med many.sus)" |
  awk '{printf "  Redis time in scripts per request (commandstats): one at a time gateway %.1f us vs floor %.1f us; at saturation gateway %.1f vs floor %.1f us, 10,000 teams %.1f us\n", $1, $2, $3, $4, $5}'
if [ $MANY = 1 ]; then
  echo "$(med many.cpu) $(med many.dcpu) $(med many.rcpu) $(med many.drcpu)" |
    awk '{printf "  10,000 teams at saturation: gateway CPU %.0f us per request in its phase plus %.1f us deferred (its held usage, sent after it); Redis %.1f plus %.1f us\n", $1, $2, $3, $4}'
  echo "$(med one.cpu) $(med one.rcpu)" | awk '{printf "  one team, the same wrk script (one): gateway CPU %.0f us per request, Redis %.1f us\n", $1, $2}'
  echo "$(med many.rps) $(med one.rps) $(med many1.p50) $(med one1.p50) $(med direct1.p50)" |
    awk '{printf "  10,000 teams / 100,000 sessions vs one of each: throughput %.3f, overhead one at a time (p50 - direct) %.3f (target within 10%%)\n", $1/$2, ($3-$5)/($4-$5)}'
  echo "$(med many.rps) $(med gateway.rps) $(med many1.p50) $(med gateway1.p50) $(med direct1.p50)" |
    awk '{printf "  the same against the one-team phases whose request wrk formats once (the measure before 2026-12-07): throughput %.3f, overhead %.3f\n", $1/$2, ($3-$5)/($4-$5)}'
  echo "  10,000 teams, one at a time alternating per request (bench/alternate): overhead $(paired overhead alt.many alt.gateway alt.direct) (median of the rounds), spread $(spread overhead alt.many alt.gateway alt.direct)"
fi
if [ $LEVELS = 1 ]; then
  echo "$(med lvmany.rps) $(med lvone.rps) $(med lvmany1.p50) $(med lvone1.p50) $(med direct1.p50)" |
    awk '{printf "  100,000 keys and 100,000 end users vs one of each (3 levels a request): throughput %.3f, overhead one at a time (p50 - direct) %.3f (target within 10%%)\n", $1/$2, ($3-$5)/($4-$5)}'
  [ "$K" -le 1 ] || echo "  levels, paired: throughput $(paired ratio lvmany.rps lvone.rps), overhead one at a time $(paired overhead lvmany1.p50 lvone1.p50 direct1.p50)"
  echo "  levels, one at a time alternating per request (bench/alternate): overhead $(paired overhead alt.lvmany alt.lvone alt.direct) (median of the rounds), spread $(spread overhead alt.lvmany alt.lvone alt.direct)"
fi
[ ${#duos[@]} = 0 ] || {
  line="  both at once (duo: the two sides loaded together, C/2 connections each), median of the rounds' ratios:"
  [ $MANY = 0 ] || line="$line 10,000 teams/one $(paired ratio duo.many duo.one) ($(spread ratio duo.many duo.one));"
  [ $LEVELS = 0 ] || line="$line levels $(paired ratio duo.lvmany duo.lvone) ($(spread ratio duo.lvmany duo.lvone));"
  [ $HITS = 0 ] || line="$line cacheable miss/cache off $(paired ratio duo.unique duo.unique0) ($(spread ratio duo.unique duo.unique0))"
  [ -z "$MFLOORPID" ] || line="$line; miss floor/floor $(paired ratio duo.munique duo.funique) ($(spread ratio duo.munique duo.funique))"
  echo "$line"
}
if [ $HITS = 1 ]; then
  echo "$(med cached.rps) $(med floor.rps) $(med cached1.p50) $(med floor1.p50) $(med unique.rps) $(med unique0.rps)" |
    awk '{printf "  response cache: hits at saturation %.3f x the floor (target >= 1.5), hit p50 one at a time %+.0f us vs the floor (target < 0); a cacheable miss %.3f x the same request with the cache off (target >= 0.95)\n", $1/$2, $3-$4, $5/$6}'
  [ "$K" -le 1 ] || echo "  response cache, paired: hits/floor $(paired ratio cached.rps floor.rps), hit p50 - floor $(paired diff cached1.p50 floor1.p50) us, miss/off $(paired ratio unique.rps unique0.rps)"
  [ -z "$MFLOORPID" ] || echo "$(med munique.rps) $(med munique0.rps) $(med funique.rps) $(paired ratio munique.rps funique.rps) $(paired ratio munique0.rps funique.rps) $(spread ratio munique.rps funique.rps)" |
    awk '{printf "  miss floor (bench/floorproxy -cache: the least a cacheable miss can cost): %.3f x the floor with the same requests, paired %.3f (%s); without the lease %.3f, paired %.3f\n", $1/$3, $4, $6, $2/$3, $5}'
fi
# memory (SPEC 16: steady memory under 100 MB RSS at saturation): the peak
# resident set over the whole run (VmHWM: warm-up and every phase), and now
rss() { awk '/^VmHWM/ {h=$2} /^VmRSS/ {r=$2} END {printf "%.0f MB peak, %.0f MB now", h/1024, r/1024}' "/proc/$1/status"; }
line="  memory (RSS, server.memory_limit $MEMLIMIT, gc_percent $GCP): gateway $(rss $GWPID); floor $(rss $FLOORPID)"
[ $MANY = 0 ] || line="$line; 10,000 teams $(rss $GWMPID)"
[ $LEVELS = 0 ] || line="$line; 100,000 keys and users $(rss $GWLPID)"
echo "$line"
# writes a gateway's bounds dropped (SPEC 9: every writer bound is counted):
# any here means a figure was measured on a node that lost shared-state
# writes (usage_folded is a merge into "(other)", not a loss)
drops() { curl -s "http://$1/metrics" | awk '/^switchyard_(edge|audit|usage)_dropped_total/ && $NF != 0 {printf " %s=%s", $1, $NF}'; }
line="  dropped writes (nonzero counters):"
for g in "gateway $GW" ${GWMPID:+"10,000-teams $GWM"} ${GWLPID:+"levels $GWL"} ${GWCPID:+"cache $GWC"}; do line="$line ${g%% *}:[$(drops "${g#* }") ]"; done
echo "$line"
if [ "$K" -gt 1 ]; then
  line="  paired per round (median of each round's own ratio): gateway/floor $(paired ratio gateway.rps floor.rps), p50 gateway - floor $(paired diff gateway1.p50 floor1.p50) us"
  [ $REDIS = 0 ] || line="$line, gateway/cfloor $(paired ratio gateway.rps cfloor.rps), p50 gateway - cfloor $(paired diff gateway1.p50 cfloor1.p50) us"
  [ $MANY = 0 ] || line="$line, 10,000 teams: throughput $(paired ratio many.rps one.rps), overhead one at a time $(paired overhead many1.p50 one1.p50 direct1.p50) (against gateway: $(paired ratio many.rps gateway.rps))"
  echo "$line"
  line="  spread per round (lowest..highest of the rounds' own ratios): gateway/floor $(spread ratio gateway.rps floor.rps), p50 gateway - floor $(spread diff gateway1.p50 floor1.p50) us"
  [ $MANY = 0 ] || line="$line, 10,000 teams: throughput $(spread ratio many.rps one.rps), overhead $(spread overhead many1.p50 one1.p50 direct1.p50)"
  [ $LEVELS = 0 ] || line="$line, levels: throughput $(spread ratio lvmany.rps lvone.rps), overhead $(spread overhead lvmany1.p50 lvone1.p50 direct1.p50)"
  [ $HITS = 0 ] || line="$line, cache: hits/floor $(spread ratio cached.rps floor.rps), miss/off $(spread ratio unique.rps unique0.rps)"
  echo "$line"
fi
if [ $TRACE = 1 ]; then
  echo "$(med traced.rps) $(med gateway.rps) $(med traced1.p50) $(med gateway1.p50)" | awk '{printf "  tracing on (every span exported): throughput traced/untraced = %.3f, p50 one at a time traced - untraced = %+.0f us\n", $1/$2, $3-$4}'
  dropped=$(curl -sf "http://$GWT/metrics" | awk '/^switchyard_tracing_spans_dropped_total/ {s+=$2} END {print s+0}')
  exported=$(curl -sf "http://$GWT/metrics" | awk '/^switchyard_tracing_spans_exported_total/ {s+=$2} END {print s+0}')
  echo "  spans exported=$exported dropped=$dropped"
fi
