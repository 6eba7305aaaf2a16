-- The request bench/overhead.sh and bench/profile1.sh send (the base of
-- overhead.sh's variants): one small chat completion of team "bench".
-- Prints: RESULT requests errors requests/s p50-us p99-us
wrk.method = "POST"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"hello"}],"max_tokens":16}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.1f %.1f %.1f\n", summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99)))
end
