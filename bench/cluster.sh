#!/usr/bin/env bash
# Cluster mode of the overhead bench (SPEC 9, 16): redis-server, three
# `switchyard serve` replicas sharing it, nginx from Debian as the load
# balancer and `switchyard mockllm` as the upstream, all on loopback. `wrk`
# runs for a fixed time against each phase, interleaved over rounds:
#
#   direct      wrk -> mockllm
#   lb-floor    wrk -> nginx -> mockllm          (the load-balancer hop alone)
#   limits-on   wrk -> nginx -> 3 replicas -> mockllm, team with rpm/tpm (huge) in Redis
#   limits-off  wrk -> nginx -> 3 replicas -> mockllm, team with no limits
#
# The two gateway phases use the same replicas and the same config; only the
# client's key differs (it names a limited or an unlimited team). Session
# keeping is off, so a request of the unlimited team has no Redis work before
# its upstream call, and one of the limited team exactly one round trip (the
# edge-limit script, SPEC 9).
#
# Redis figures, per request, from INFO after `CONFIG RESETSTAT` at the start
# of each gateway phase (read 1s after wrk stops, so the batched writes that
# follow the last responses are counted too):
#   round trips  INFO stats total_reads_processed: read events, i.e. client
#                writes that reached Redis (one per command or pipeline, as
#                go-redis sends each pipeline in one write). It counts the
#                request path AND the asynchronous batched writes after the
#                responses (usage reconcile, audit stream) AND a little
#                background traffic (node heartbeats, catalog), so it is an
#                upper bound of the hot-path round trips.
#   evalsha      INFO commandstats cmdstat_evalsha calls (admission scripts on
#                the request path, usage/reconcile scripts in the batches).
#   commands     INFO stats total_commands_processed. Redis 7 counts the
#                commands a script runs too, so this is the work Redis does,
#                not the number of round trips.
#   The per-command breakdown (INFO commandstats, calls per request; commands
#   run inside scripts included) is printed under the table.
# Requests are wrk's completed requests of that phase (errors = non-2xx,
# connect, read, write and timeout errors).
#
#   bench/cluster.sh [-d SECONDS] [-c CONNECTIONS] [-k ROUNDS] [-t THREADS] [-w NGINX_WORKERS]
set -euo pipefail
cd "$(dirname "$0")/.."
D=5; C=50; K=2; T=2; W=1
while getopts "d:c:k:t:w:" o; do
  case $o in d) D=$OPTARG;; c) C=$OPTARG;; k) K=$OPTARG;; t) T=$OPTARG;; w) W=$OPTARG;; *) exit 2;; esac
done
for b in wrk redis-server redis-cli nginx curl; do
  command -v $b >/dev/null || { echo "bench: needs $b (apt-get install -y wrk redis-server nginx curl)"; exit 1; }
done

out=$(mktemp -d); pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

MOCK=127.0.0.1:19201; RPORT=19202; GWS=(127.0.0.1:19203 127.0.0.1:19204 127.0.0.1:19205)
LB=127.0.0.1:19206; LBFLOOR=127.0.0.1:19207
R() { redis-cli -h 127.0.0.1 -p $RPORT "$@" | tr -d '\r'; }

echo "building..."
go build -o "$out/switchyard" ./cmd/switchyard

"$out/switchyard" mockllm -listen $MOCK -ttfb 0s -tps 100000 2>"$out/mock.log" & pids+=($!)
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --loglevel warning \
  --logfile "$out/redis.log" --dir "$out" & pids+=($!)

cat > "$out/gw.yaml" <<YAML
# one file for the three replicas; listen and node_id come from
# SWITCHYARD_SERVER_LISTEN and SWITCHYARD_SERVER_NODE_ID
data_dir: ""
redis: {url: "redis://127.0.0.1:$RPORT/0", expected_replicas: 3}
providers: [{name: mock, kind: openai, base_url: "http://$MOCK/v1", api_key: "x"}]
deployments: [{id: mock-1, model: bench, provider: mock}]
routing: {session_keeping: false}
teams:
  - {name: limited, keys: ["sk-bench-on"], models: ["*"], rpm: 100000000, tpm: 100000000000}
  - {name: unlimited, keys: ["sk-bench-off"], models: ["*"]}
YAML
"$out/switchyard" check -config "$out/gw.yaml" >/dev/null
for i in 0 1 2; do
  SWITCHYARD_SERVER_LISTEN=${GWS[$i]} SWITCHYARD_SERVER_NODE_ID=bench-$((i + 1)) \
    "$out/switchyard" serve -config "$out/gw.yaml" 2>"$out/gw$i.log" & pids+=($!)
done

user_line=""
[ "$(id -u)" = 0 ] && user_line="user $(id -un) $(id -gn);"   # workers as the current user, not nobody
cat > "$out/nginx.conf" <<NGINX
$user_line
worker_processes $W;
error_log $out/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $out/nginx-body;
    proxy_temp_path $out/nginx-proxy;
    fastcgi_temp_path $out/nginx-fastcgi;
    uwsgi_temp_path $out/nginx-uwsgi;
    scgi_temp_path $out/nginx-scgi;
    keepalive_requests 1000000;
    upstream switchyard {
        least_conn;
        server ${GWS[0]}; server ${GWS[1]}; server ${GWS[2]};
        keepalive 64; keepalive_requests 1000000;
    }
    upstream mockllm { server $MOCK; keepalive 64; keepalive_requests 1000000; }
    map \$http_x_request_id \$rid { default \$http_x_request_id; "" \$request_id; }
    server {
        listen $LB;
        location / {
            proxy_pass http://switchyard;
            proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header X-Request-Id \$rid;
            proxy_buffering off; proxy_cache off; proxy_read_timeout 600s;
        }
    }
    server {
        listen $LBFLOOR;
        location / {
            proxy_pass http://mockllm;
            proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header X-Request-Id \$rid;
            proxy_buffering off; proxy_cache off; proxy_read_timeout 600s;
        }
    }
}
NGINX
nginx -t -q -p "$out" -c "$out/nginx.conf" -e "$out/nginx-error.log"
nginx -p "$out" -c "$out/nginx.conf" -e "$out/nginx-error.log" -g "daemon off; pid $out/nginx.pid;" & pids+=($!)

ready=0
for _ in $(seq 1 100); do
  if curl -sf "http://$MOCK/healthz" >/dev/null && R PING 2>/dev/null | grep -q PONG &&
     curl -sf "http://${GWS[0]}/readyz" >/dev/null && curl -sf "http://${GWS[1]}/readyz" >/dev/null &&
     curl -sf "http://${GWS[2]}/readyz" >/dev/null && curl -sf "http://$LB/readyz" >/dev/null; then
    ready=1; break
  fi
  sleep 0.1
done
[ $ready = 1 ] || { echo "bench: the cluster did not come up; logs:"; tail -n 5 "$out"/*.log; exit 1; }

BODY='{"model":"bench","messages":[{"role":"user","content":"hello"}],"max_tokens":16}'
for key in on off; do # fail fast when a key is not served
  code=$(curl -s -o "$out/check.json" -w '%{http_code}' "http://$LB/v1/chat/completions" \
    -H "Authorization: Bearer sk-bench-$key" -H "Content-Type: application/json" -d "$BODY")
  [ "$code" = 200 ] || { echo "bench: limits-$key answered $code: $(head -c 300 "$out/check.json")"; exit 1; }
done

lua() { # file key
  cat > "$out/$1" <<LUA
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $2"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.1f %.1f %.1f\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99)))
end
LUA
}
lua direct.lua sk-bench-on; lua on.lua sk-bench-on; lua off.lua sk-bench-off

echo "warming up (1s per target)..."
for t in "direct.lua http://$MOCK" "direct.lua http://$LBFLOOR" "on.lua http://$LB" "off.lua http://$LB"; do
  set -- $t
  wrk -t"$T" -c"$C" -d1s -s "$out/$1" "$2/v1/chat/completions" >/dev/null 2>&1
done

declare -A S            # sums over rounds: phase.{n,err,rps,p50,p99,reads,cmds,evalsha}
declare -A CMD          # phase|command -> calls summed over rounds
PHASES=(direct lb-floor limits-on limits-off)
run() { # phase script base-url redis(0|1)
  local phase=$1 script=$2 url=$3 redis=$4
  [ "$redis" = 0 ] || R CONFIG RESETSTAT >/dev/null
  wrk -t"$T" -c"$C" -d"${D}s" -s "$out/$script" "$url/v1/chat/completions" >"$out/$phase.txt" 2>&1 || true
  local n errs rps p50 p99
  read -r _ n errs rps p50 p99 < <(grep RESULT "$out/$phase.txt" || echo "RESULT 0 0 0 0 0")
  S[$phase.n]=$(( ${S[$phase.n]:-0} + n )); S[$phase.err]=$(( ${S[$phase.err]:-0} + errs ))
  S[$phase.rps]=$(awk -v a="${S[$phase.rps]:-0}" -v b="$rps" 'BEGIN{print a+b}')
  S[$phase.p50]=$(awk -v a="${S[$phase.p50]:-0}" -v b="$p50" 'BEGIN{print a+b}')
  S[$phase.p99]=$(awk -v a="${S[$phase.p99]:-0}" -v b="$p99" 'BEGIN{print a+b}')
  local extra=""
  if [ "$redis" = 1 ]; then
    sleep 1 # let the replicas' batched writes for the last responses land
    local stats reads cmds
    stats=$(R INFO stats)
    reads=$(awk -F: '$1=="total_reads_processed"{print $2}' <<<"$stats")
    cmds=$(awk -F: '$1=="total_commands_processed"{print $2}' <<<"$stats")
    S[$phase.reads]=$(( ${S[$phase.reads]:-0} + reads )); S[$phase.cmds]=$(( ${S[$phase.cmds]:-0} + cmds ))
    while IFS=' ' read -r name calls; do
      CMD["$phase|$name"]=$(( ${CMD["$phase|$name"]:-0} + calls ))
    done < <(R INFO commandstats | sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),.*/\1 \2/p')
    extra=$(awk -v r="$reads" -v n="$n" 'BEGIN{printf " redis round trips/req=%.3f", (n ? r/n : 0)}')
  fi
  printf "  %-10s rps=%-8.0f p50=%-8sus p99=%-8sus requests=%s errors=%s%s\n" "$phase" "$rps" "$p50" "$p99" "$n" "$errs" "$extra"
}

for r in $(seq 1 "$K"); do
  echo "== round $r/$K: $C connections, $T wrk threads, ${D}s per phase, nginx workers: $W"
  run direct direct.lua "http://$MOCK" 0
  run lb-floor direct.lua "http://$LBFLOOR" 0
  run limits-on on.lua "http://$LB" 1
  run limits-off off.lua "http://$LB" 1
done

rss=""
for i in 1 2 3; do
  p=${pids[$((i + 1))]}
  rss+=" $(awk '/^VmRSS/{printf "%.0fMB", $2/1024}' "/proc/$p/status" 2>/dev/null || echo "?")"
done

echo "== result: means over $K rounds ($C connections, ${D}s per phase); Redis figures per request"
printf "  %-10s %9s %9s %9s %8s %9s %12s %9s %9s\n" phase rps p50_us p99_us errors vs_floor round_trips evalsha commands
floor_rps=$(awk -v s="${S[lb-floor.rps]}" -v k="$K" 'BEGIN{print s/k}')
for ph in "${PHASES[@]}"; do
  awk -v ph="$ph" -v k="$K" -v rps="${S[$ph.rps]}" -v p50="${S[$ph.p50]}" -v p99="${S[$ph.p99]}" \
      -v err="${S[$ph.err]}" -v n="${S[$ph.n]}" -v fl="$floor_rps" \
      -v reads="${S[$ph.reads]:-}" -v cmds="${S[$ph.cmds]:-}" -v ev="${CMD[$ph|evalsha]:-0}" 'BEGIN{
    rt = "-"; e = "-"; c = "-"
    if (reads != "" && n > 0) { rt = sprintf("%.3f", reads/n); e = sprintf("%.3f", ev/n); c = sprintf("%.3f", cmds/n) }
    printf "  %-10s %9.0f %9.0f %9.0f %8d %9.3f %12s %9s %9s\n", ph, rps/k, p50/k, p99/k, err, (rps/k)/fl, rt, e, c }'
done
for ph in limits-on limits-off; do
  line=""
  for key in "${!CMD[@]}"; do
    [ "${key%%|*}" = "$ph" ] || continue
    line+=$(awk -v c="${key#*|}" -v v="${CMD[$key]}" -v n="${S[$ph.n]}" 'BEGIN{ if (n > 0 && v/n >= 0.0005) printf "%s=%.3f\n", c, v/n }')$'\n'
  done
  echo "  $ph, Redis calls per request by command (script-internal included): $(sort <<<"$line" | grep -v '^$' | tr '\n' ' ')"
done
echo "  replicas' RSS at the end:$rss"
