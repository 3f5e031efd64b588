# Sourced by scripts/bench: the "topology" section (issue 13 item 7). The same gateway, load and
# wrk run against one redis-server, a 3-primary/3-replica Redis Cluster, and that cluster with
# redis.wait_replicas: 1 (commit scripts confirmed by WAIT), for refresh and the proxied `api`
# bucket. Knob: BENCH_TOPOLOGY_SECONDS (seconds per run, default 10).

TOPOLOGY_SECONDS=${BENCH_TOPOLOGY_SECONDS:-10}

# topology_config NAME URL [EXTRA]: a config dir like the main one, Redis replaced.
topology_config() {
    local dir=$BENCH/conf-$1
    rm -rf "$dir"
    write_config "$dir" 1
    awk -v url="$2" -v extra="${3:-}" '
        /^redis:$/ { print; getline; print "  url: " url; if (extra != "") print extra; next }
        { print }' "$dir/gateway.yaml" >"$dir/gateway.yaml.new"
    mv "$dir/gateway.yaml.new" "$dir/gateway.yaml"
    echo "$dir"
}

# topology_run NAME: refresh load and api wrk against the gateway serving $BENCH/conf-NAME.
topology_run() {
    local name=$1 section=$2
    start_gateway "$BENCH/conf-$name"
    rm -f "$BENCH/device.json"
    obtain_token
    set_auth_headers
    probe_proxy
    run_load "$TOPOLOGY_SECONDS" "$REFRESH_CONNECTIONS" $(( REFRESH_CONNECTIONS * 16 )) "$BENCH/load-$name.txt"
    result "$section" "$name: refreshes/s" "$(fmt "$L_RPS" 0)" \
        "refresh p50 $L_P50, p99 $L_P99; errors $L_ERRORS${L_ERROR_CODES:+ ($L_ERROR_CODES)}"
    eval "TOPO_REFRESH_$name=$L_RPS"
    if [ "$PROXY_OK" = 1 ]; then
        run_wrk "api-$name" "$GW/api/bench" 64 "$TOPOLOGY_SECONDS" "${AUTH_HEADERS[@]}"
        result "$section" "$name: proxied api req/s (wrk c=64)" "$(fmt "$W_RPS" 0)" \
            "p50 $(fmt "$W_P50_MS" 2) ms, p99 $(fmt "$W_P99_MS" 2) ms, errors $(( W_STATUS_ERRORS + W_SOCKET_ERRORS ))"
        eval "TOPO_API_$name=$W_RPS"
    else
        result "$section" "$name: proxied api req/s" "not measured" "$PROXY_REASON"
    fi
    stop_gateway
}

bench_topology() {
    step "topology benchmark: one server vs a 3+3 cluster (and WAIT 1), ${TOPOLOGY_SECONDS}s per run"
    local section="topology (refresh load ${TOPOLOGY_SECONDS}s, wrk api c=64)"
    start_redis_cluster "$BENCH/cluster" >"$BENCH/cluster.log" 2>&1 || die "cluster did not start: $(tail -n 5 "$BENCH/cluster.log")"
    CLUSTER_STARTED=1
    local ports seeds
    read -r -a ports <"$BENCH/cluster/ports"
    seeds=$(printf '127.0.0.1:%s,' "${ports[@]:0:3}")
    topology_config single "redis://127.0.0.1:$REDIS_PORT/0" >/dev/null
    topology_config cluster "redis-cluster://${seeds%,}" >/dev/null
    topology_config wait1 "redis-cluster://${seeds%,}" "  wait_replicas: 1
  wait_timeout: 100ms" >/dev/null
    # Each run registers its own device (the cluster runs on other Redis servers); the main
    # token and device come back afterwards, or the scale sections would proxy with a token whose
    # device exists only in the cluster (refused 403 `forbidden`, like a revoked one).
    local name main_token=$TOKEN
    cp "$BENCH/device.json" "$BENCH/device.json.main"
    for name in single cluster wait1; do topology_run "$name" "$section"; done
    TOKEN=$main_token
    mv "$BENCH/device.json.main" "$BENCH/device.json"
    set_auth_headers
    result "$section" "cluster / single refreshes/s" "$(fmt "$(calc "$TOPO_REFRESH_cluster / $TOPO_REFRESH_single")" 2)x"
    result "$section" "WAIT 1 / cluster refreshes/s" "$(fmt "$(calc "$TOPO_REFRESH_wait1 / $TOPO_REFRESH_cluster")" 2)x" \
        "what confirming commits costs"
    if [ -n "${TOPO_API_single:-}" ] && [ -n "${TOPO_API_cluster:-}" ]; then
        result "$section" "cluster / single api req/s" "$(fmt "$(calc "$TOPO_API_cluster / $TOPO_API_single")" 2)x"
    fi
}
