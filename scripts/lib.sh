# Shared shell helpers for scripts/run, scripts/test and scripts/bench.

# Debian packages the gateway needs to build and run.
AG_PACKAGES=(libevent-dev libhiredis-dev libssl-dev libyaml-dev redis-server pkg-config)

# Installs whatever of the given Debian packages is missing.
ensure_packages() {
    local missing=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing: ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
}

# Builds release products (`swift build -c release` arguments, e.g. `--product attestgate`)
# from scratch whenever a source file changed since the last release build here, else
# incrementally (nothing to do). An incremental release build after a change to a type that
# other modules inline (`-cross-module-optimization`) has produced binaries whose code disagreed
# about a struct's layout: writes past an object, a double free at exit (docs/benchmarks.md,
# stops 30 and 31). A clean build of the same sources is sound; this pays its ~4 minutes only
# when something changed.
release_build() {
    local bin_path stamp fingerprint
    bin_path=$(swift build -c release --show-bin-path)
    stamp=.build/release-sources.sha256
    fingerprint=$( (find Sources Package.swift -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$fingerprint" ]; then
        [ -d "$bin_path" ] && echo "sources changed since the last release build: building $bin_path from scratch" >&2
        rm -rf "$bin_path" "$stamp"
    fi
    swift build -c release "$@" >&2 || return 1
    # Every product built from these sources: a later call for another product reuses them.
    echo "$fingerprint" >"$stamp"
}

# Prints a TCP port that is free on 127.0.0.1 right now.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Starts a redis-server on 127.0.0.1:$1 with its files in $2; waits until it answers.
# With a third argument "persistent" (scripts/run) it keeps an append-only file in $2, fsynced
# every second, so a restart keeps devices, revocations and tier overrides; without it (tests)
# nothing is written to disk.
start_redis() {
    local port=$1 dir persistence=(--save '' --appendonly no)
    dir=$(mkdir -p "$2" && cd "$2" && pwd)
    [ "${3:-}" = "persistent" ] && persistence=(--save '' --appendonly yes --appendfsync everysec)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" "${persistence[@]}" --maxmemory-policy noeviction \
        --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null
    for _ in $(seq 1 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "redis-server did not start on port $port (see $dir/redis.log)" >&2
    return 1
}

# Stops the redis-server start_redis started in $1 and waits (up to 10 s) until it has exited,
# so its append-only file is complete and its port free.
stop_redis() {
    local dir pid
    dir=$(cd "$1" 2>/dev/null && pwd) || return 0
    [ -f "$dir/redis.pid" ] && stop_pid "$(cat "$dir/redis.pid")"
    return 0
}

# Sends SIGTERM to process $1 and waits (up to 10 s) until it has gone, so that nothing is still
# writing into a directory the caller is about to remove.
stop_pid() {
    kill "$1" 2>/dev/null || return 0
    local i
    for i in $(seq 100); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -9 "$1" 2>/dev/null || true
}

# Prints $1 TCP ports that are free on 127.0.0.1 right now, all different.
free_ports() {
    python3 -c '
import socket, sys
sockets = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); sockets.append(s)
print(" ".join(str(s.getsockname()[1]) for s in sockets))
for s in sockets: s.close()' "$1"
}

# Polls `$@` every 50 ms until it succeeds or $AG_WAIT_SECONDS (default 30) pass.
wait_for() {
    local tries=$(( ${AG_WAIT_SECONDS:-30} * 20 ))
    for _ in $(seq 1 "$tries"); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    return 1
}

# Writes a redis-server config for 127.0.0.1:$1 under $2/$1 (extra lines from stdin) and starts it.
start_redis_node() {
    local port=$1 dir="$2/$1"
    mkdir -p "$dir"
    {
        echo "port $port"; echo "bind 127.0.0.1"; echo "dir $dir"; echo "save \"\""; echo "appendonly no"
        echo "daemonize yes"; echo "pidfile $dir/redis.pid"; echo "logfile $dir/redis.log"
        cat
    } > "$dir/redis.conf"
    redis-server "$dir/redis.conf" >/dev/null 2>&1
}

# Runs start function $1 with the group directory $2 (and the rest) up to three times. A failed
# attempt stops whatever it had started and clears the directory: the ports free_ports found
# can be taken by another process before a node binds them (an outgoing connection's ephemeral
# port comes from the same range), and a half-started group must not outlive the attempt (its
# processes kept running and broke the next test run's cluster creation).
start_redis_group() {
    local start=$1 dir=$2 attempt
    shift
    for attempt in 1 2 3; do
        "$start" "$@" && return 0
        stop_redis_group "$dir"
        rm -rf "${dir:?}"/*
        [ "$attempt" -lt 3 ] && echo "attempt $attempt failed; starting again on other ports" >&2
    done
    return 1
}

# Starts a 3-primary/3-replica Redis Cluster on loopback with its files in $1; $2 is
# cluster-node-timeout in ms (default 5000: a loaded CI machine must not trigger failovers).
# Writes the node ports to $1/ports and returns once every node sees all 16384 slots served
# and every replica is in sync. Stops what it started when it fails, after three attempts.
start_redis_cluster() { start_redis_group start_redis_cluster_once "$@"; }

start_redis_cluster_once() {
    local dir node_timeout=${2:-5000} ports port bus nodes=()
    dir=$(mkdir -p "$1" && cd "$1" && pwd)
    read -r -a ports <<< "$(free_ports 12)"
    for index in 0 1 2 3 4 5; do
        port=${ports[$index]} bus=${ports[$((index + 6))]}
        # full-coverage off: the other primaries keep serving while one's replica takes over
        # (the setting the README recommends).
        printf 'cluster-enabled yes\ncluster-config-file %s\ncluster-node-timeout %s\ncluster-port %s\ncluster-require-full-coverage no\n' \
            "$dir/$port/nodes.conf" "$node_timeout" "$bus" | start_redis_node "$port" "$dir"
        nodes+=("127.0.0.1:$port")
    done
    echo "${ports[*]:0:6}" > "$dir/ports"
    for port in ${ports[*]:0:6}; do
        wait_for redis-cli -p "$port" ping || { echo "cluster node $port did not start (see $dir/$port/redis.log)" >&2; return 1; }
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
        { echo "redis-cli --cluster create failed (see $dir/create.log)" >&2; return 1; }
    for port in ${ports[*]:0:6}; do
        wait_for cluster_node_ready "$port" || { echo "cluster node $port not ready" >&2; return 1; }
    done
}

# True when the node at 127.0.0.1:$1 sees a healthy 6-node cluster and, if it is a replica,
# is in sync with its primary.
cluster_node_ready() {
    local info replication
    info=$(redis-cli -p "$1" cluster info) || return 1
    grep -q '^cluster_state:ok' <<< "$info" && grep -q '^cluster_slots_ok:16384' <<< "$info" &&
        grep -q '^cluster_known_nodes:6' <<< "$info" || return 1
    replication=$(redis-cli -p "$1" info replication) || return 1
    grep -q '^role:master' <<< "$replication" || grep -q '^master_link_status:up' <<< "$replication"
}

# Starts a primary, two replicas and three sentinels (master name "agmaster", quorum 2) on
# loopback with their files in $1. Writes "primary replica replica" to $1/ports and the
# sentinel ports to $1/sentinels; returns once every sentinel knows both replicas and the
# other sentinels, so `SENTINEL FAILOVER` and a killed primary are both handled at once.
# Stops what it started when it fails, after three attempts.
start_redis_sentinels() { start_redis_group start_redis_sentinels_once "$@"; }

start_redis_sentinels_once() {
    local dir ports primary port
    dir=$(mkdir -p "$1" && cd "$1" && pwd)
    read -r -a ports <<< "$(free_ports 6)"
    primary=${ports[0]}
    start_redis_node "$primary" "$dir" < /dev/null
    wait_for redis-cli -p "$primary" ping || { echo "sentinel primary did not start" >&2; return 1; }
    for port in "${ports[1]}" "${ports[2]}"; do
        echo "replicaof 127.0.0.1 $primary" | start_redis_node "$port" "$dir"
    done
    for port in "${ports[1]}" "${ports[2]}"; do
        wait_for replica_in_sync "$port" || { echo "replica $port did not sync" >&2; return 1; }
    done
    echo "${ports[*]:0:3}" > "$dir/ports"
    for port in "${ports[3]}" "${ports[4]}" "${ports[5]}"; do
        mkdir -p "$dir/$port"
        printf 'port %s\nbind 127.0.0.1\ndir %s\ndaemonize yes\npidfile %s\nlogfile %s\n' \
            "$port" "$dir/$port" "$dir/$port/redis.pid" "$dir/$port/redis.log" > "$dir/$port/sentinel.conf"
        printf 'sentinel monitor agmaster 127.0.0.1 %s 2\nsentinel down-after-milliseconds agmaster 1000\n' \
            "$primary" >> "$dir/$port/sentinel.conf"
        printf 'sentinel failover-timeout agmaster 10000\nsentinel parallel-syncs agmaster 2\n' >> "$dir/$port/sentinel.conf"
        redis-server "$dir/$port/sentinel.conf" --sentinel >/dev/null 2>&1
    done
    echo "${ports[*]:3:3}" > "$dir/sentinels"
    for port in "${ports[3]}" "${ports[4]}" "${ports[5]}"; do
        wait_for sentinel_ready "$port" || { echo "sentinel $port not ready (see $dir/$port/redis.log)" >&2; return 1; }
    done
}

replica_in_sync() {
    redis-cli -p "$1" info replication | grep -q '^master_link_status:up'
}

# True when the sentinel at 127.0.0.1:$1 knows agmaster's two replicas and two other sentinels.
sentinel_ready() {
    local state
    state=$(redis-cli -p "$1" sentinel master agmaster | paste - -) || return 1
    grep -qP '^num-slaves\t2$' <<< "$state" && grep -qP '^num-other-sentinels\t2$' <<< "$state" &&
        grep -qP '^flags\tmaster$' <<< "$state"
}

# Stops every redis-server and sentinel whose pid file lies under $1.
stop_redis_group() {
    local dir pidfile
    dir=$(cd "$1" 2>/dev/null && pwd) || return 0
    local pid
    # A server removes its pid file as it exits: read each once, quietly.
    for pidfile in "$dir"/*/redis.pid; do
        pid=$(cat "$pidfile" 2>/dev/null) && kill "$pid" 2>/dev/null
    done
    for pidfile in "$dir"/*/redis.pid; do
        pid=$(cat "$pidfile" 2>/dev/null) && stop_pid "$pid"
    done
    return 0
}

# Python modules the interop tests drive (an independent JOSE implementation, and the
# Prometheus project's exposition parser): installs them when one is missing, quietly, with pip
# from PyPI. A Python that marks itself externally managed (PEP 668) gets them with
# --break-system-packages.
ensure_python_test_modules() {
    python3 -c 'import jwcrypto, cryptography, prometheus_client' 2>/dev/null && return 0
    local modules=(jwcrypto cryptography prometheus-client)
    echo "installing Python modules: ${modules[*]}" >&2
    local pip=(env PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check)
    "${pip[@]}" "${modules[@]}" >/dev/null 2>&1 || "${pip[@]}" --break-system-packages "${modules[@]}" >&2
}
