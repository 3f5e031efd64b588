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
    [ -f "$dir/redis.pid" ] || return 0
    pid=$(cat "$dir/redis.pid")
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 200); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.05
    done
}

# Python modules the interop tests drive (an independent JOSE implementation): installs
# whichever of jwcrypto and cryptography is missing, quietly, with pip from PyPI. A Python that
# marks itself externally managed (PEP 668) gets them with --break-system-packages.
ensure_python_test_modules() {
    python3 -c 'import jwcrypto, cryptography' 2>/dev/null && return 0
    echo "installing Python modules: jwcrypto cryptography" >&2
    local pip=(env PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check)
    "${pip[@]}" jwcrypto cryptography >/dev/null 2>&1 || "${pip[@]}" --break-system-packages jwcrypto cryptography >&2
}
