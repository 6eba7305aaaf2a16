# Shared by the bench scripts (sourced): the ports they take, the request
# spread over 10,000 teams, and stopping what they started.

# ports_free PORT...: exits with a message when a port on 127.0.0.1 answers
# (a process left from an earlier run?).
ports_free() {
  for port in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "bench: 127.0.0.1:$port is in use (a process left from an earlier run?)"; exit 1; fi
  done
}

# stop_started: stops the processes in the pids array, last first, each
# before the next: the gateways while Redis still answers their final flush
# (with Redis gone first each spent its whole 30 s shutdown budget retrying,
# and a run started right after found the 10,000-team gateway still on its
# port); at most 40 s each. Only the pids the script recorded, by pid.
stop_started() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    p=${pids[i]}
    kill "$p" 2>/dev/null || continue
    for _ in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  done
}

# many_lua OUT [LAST]: writes to OUT the wrk script of the 10,000-team phases
# (overhead.sh -m, opsmem.sh): bench/post.lua's request under one of
# sessions 0 to LAST (default 99,999: 100,000 sessions, ten per team) at
# random, sent with the key of the team the session belongs to (sk-t0 to
# sk-t9999). With LAST 0 it is the one-team baseline's script: session s0
# with key sk-t0, built the same way on every request, so wrk (which
# shares the machine's CPUs) does the same work for both sides; a script
# whose request wrk formats once costs wrk 2-3 us less a request (measured:
# 8.7 against 10.0-11.8 us of wrk's CPU), and that difference landed on the
# 10,000-team side of the ratio.
many_lua() {
  sed -e 's/^wrk.headers\["Authorization"\].*$//' bench/post.lua > "$1"
  cat >> "$1" <<LUA
request = function()
  local s = math.random(0, ${2:-99999})
  wrk.headers["Authorization"] = "Bearer sk-t" .. (s % 10000)
  wrk.headers["X-Session-Id"] = "s" .. s
  return wrk.format()
end
LUA
}
