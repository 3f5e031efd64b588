-- wrk report script for scripts/bench: one machine-readable line after the human summary.
-- errors.status counts responses with a status >= 400 (wrk's "Non-2xx or 3xx responses").
done = function(summary, latency, requests)
  local e = summary.errors
  local seconds = summary.duration / 1e6
  io.write(string.format(
    "BENCH requests=%d seconds=%.3f rps=%.1f p50_us=%d p99_us=%d max_us=%d status_errors=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, seconds, summary.requests / seconds,
    latency:percentile(50), latency:percentile(99), latency.max,
    e.status, e.connect, e.read, e.write, e.timeout))
end
