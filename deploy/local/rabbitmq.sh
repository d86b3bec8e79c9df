#!/usr/bin/env bash
# A private RabbitMQ node on loopback, from Debian's rabbitmq-server package, without systemd.
#
#   deploy/local/rabbitmq.sh install   # apt-get install rabbitmq-server (quick when installed)
#   deploy/local/rabbitmq.sh start     # start detached on 127.0.0.1, wait until it answers AMQP
#   deploy/local/rabbitmq.sh status    # exit 0 when the node is running and answers AMQP
#   deploy/local/rabbitmq.sh stop      # stop the node (and the epmd this script started)
#
# Environment (all optional):
#   GATEWAY_RABBITMQ_PORT           AMQP port                        (default 5672)
#   GATEWAY_RABBITMQ_DIST_PORT      Erlang distribution port         (default AMQP port + 20000)
#   GATEWAY_RABBITMQ_NODENAME       Erlang node name                 (default gateway-rabbit-<port>@localhost)
#   GATEWAY_RABBITMQ_DATA_DIR       mnesia, logs, config, cookie     (default deploy/local/.data/rabbitmq-<port>)
#   GATEWAY_RABBITMQ_START_TIMEOUT  seconds to wait for start-up     (default 120)
#   ERL_EPMD_PORT                   Erlang port mapper port          (default 4369)
#   GATEWAY_SERVER_OWNER_PID        stop the node when this process exits (the test fixtures)
#
# The broker accepts user guest / password guest from loopback only:
#   amqp://guest:guest@127.0.0.1:<port>/
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"
RABBIT_BIN=/usr/lib/rabbitmq/bin  # the real scripts; /usr/sbin/* would `su rabbitmq` when root

PORT="${GATEWAY_RABBITMQ_PORT:-5672}"
DIST_PORT="${GATEWAY_RABBITMQ_DIST_PORT:-$((PORT + 20000))}"
NODENAME="${GATEWAY_RABBITMQ_NODENAME:-gateway-rabbit-${PORT}@localhost}"
DATA_DIR="${GATEWAY_RABBITMQ_DATA_DIR:-$HERE/.data/rabbitmq-$PORT}"
START_TIMEOUT="${GATEWAY_RABBITMQ_START_TIMEOUT:-120}"
export ERL_EPMD_PORT="${ERL_EPMD_PORT:-4369}"
export ERL_EPMD_ADDRESS=127.0.0.1  # an epmd started from here listens on loopback only

die() {
    echo "rabbitmq.sh: error: $*" >&2
    exit 1
}
log() { echo "rabbitmq.sh: $*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "installing packages needs root (or sudo): $*"
    fi
}

# Everything the rabbitmq scripts read comes from here, never from /etc/rabbitmq or ~.
rabbit_env() {
    DATA_DIR="$(mkdir -p "$DATA_DIR" && cd "$DATA_DIR" && pwd)"
    export HOME="$DATA_DIR"  # the Erlang cookie lives in $HOME/.erlang.cookie
    export RABBITMQ_NODENAME="$NODENAME"
    export RABBITMQ_USE_LONGNAME=false
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$PORT"
    export RABBITMQ_DIST_PORT="$DIST_PORT"
    export RABBITMQ_MNESIA_BASE="$DATA_DIR/mnesia"
    export RABBITMQ_LOG_BASE="$DATA_DIR/log"
    export RABBITMQ_PID_FILE="$DATA_DIR/rabbitmq.pid"
    export RABBITMQ_CONF_ENV_FILE="$DATA_DIR/rabbitmq-env.conf"
    export RABBITMQ_CONFIG_FILE="$DATA_DIR/rabbitmq.conf"
    export RABBITMQ_ADVANCED_CONFIG_FILE="$DATA_DIR/advanced.config"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$DATA_DIR/enabled_plugins"
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    mkdir -p "$RABBITMQ_MNESIA_BASE" "$RABBITMQ_LOG_BASE"
    : >"$RABBITMQ_CONF_ENV_FILE"
    echo "[]." >"$RABBITMQ_ENABLED_PLUGINS_FILE"
    echo "[]." >"$RABBITMQ_ADVANCED_CONFIG_FILE"
    cat >"$RABBITMQ_CONFIG_FILE" <<EOF
listeners.tcp.1 = 127.0.0.1:$PORT
loopback_users.guest = true
log.console = false
log.file.level = info
EOF
}

# Exit 0 when an AMQP 0-9-1 broker answers the protocol header with Connection.Start.
amqp_answers() {
    python3 - "$PORT" <<'EOF'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        head = s.recv(7)
except OSError:
    sys.exit(1)
# method frame (type 1) on channel 0 whose payload starts with class 10, method 10
sys.exit(0 if len(head) == 7 and head[0] == 1 and head[1:3] == b"\x00\x00" else 1)
EOF
}

# With GATEWAY_SERVER_OWNER_PID set (the test fixtures set it to pytest's pid), a watchdog stops the
# server when that process is gone, so a killed test run does not leave a server behind.
start_watchdog() {
    local owner="${GATEWAY_SERVER_OWNER_PID:-}" server_pid="$1"
    [ -n "$owner" ] || return 0
    kill -0 "$owner" 2>/dev/null || die "GATEWAY_SERVER_OWNER_PID=$owner is not a running process"
    (
        trap '' HUP INT
        while kill -0 "$owner" 2>/dev/null && kill -0 "$server_pid" 2>/dev/null; do sleep 2; done
        if kill -0 "$server_pid" 2>/dev/null; then bash "$SELF" stop; fi
    ) </dev/null >/dev/null 2>&1 &
    disown
}

epmd_answers() { epmd -port "$ERL_EPMD_PORT" -names >/dev/null 2>&1; }

apt_install() {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=600 "$@" >&2
}

cmd_install() {
    if [ -x "$RABBIT_BIN/rabbitmq-server" ] && command -v epmd >/dev/null 2>&1; then
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || die "rabbitmq-server is not installed and apt-get is missing"
    # One install at a time (parallel test sessions on a fresh machine).
    exec 9>"${TMPDIR:-/tmp}/gateway-rabbitmq-install.lock"
    flock -w 1800 9 || die "timed out waiting for another rabbitmq-server install"
    if [ -x "$RABBIT_BIN/rabbitmq-server" ] && command -v epmd >/dev/null 2>&1; then
        return 0
    fi
    log "installing Debian's rabbitmq-server"
    # Keep the package's postinst from starting a system-wide broker (there may be no init system).
    local policy=/usr/sbin/policy-rc.d created_policy=""
    if [ ! -e "$policy" ]; then
        as_root sh -c "printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy"
        created_policy=1
    fi
    local rc=0
    apt_install rabbitmq-server || {
        log "apt-get install failed; running apt-get update and retrying once"
        as_root apt-get update -q >&2 && apt_install rabbitmq-server
    } || rc=$?
    if [ -n "$created_policy" ]; then as_root rm -f "$policy"; fi
    [ "$rc" -eq 0 ] || die "apt-get install rabbitmq-server failed (exit $rc); run 'apt-get update' first?"
    [ -x "$RABBIT_BIN/rabbitmq-server" ] || die "rabbitmq-server installed but $RABBIT_BIN is missing"
}

node_pid() {
    local pid_file="$DATA_DIR/rabbitmq.pid" pid
    [ -s "$pid_file" ] || return 1
    pid="$(tr -dc '0-9' <"$pid_file")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

cmd_status() {
    rabbit_env
    if node_pid >/dev/null && amqp_answers; then
        echo "rabbitmq $NODENAME running (pid $(node_pid)), amqp://guest:guest@127.0.0.1:$PORT/"
        return 0
    fi
    echo "rabbitmq $NODENAME not running"
    return 1
}

fail_start() {
    log "$1"
    local f
    for f in "$RABBITMQ_LOG_BASE"/*.log; do
        [ -f "$f" ] || continue
        log "--- last lines of $f"
        tail -n 30 "$f" >&2
    done
    cmd_stop || true # leave nothing half-started behind
    exit 1
}

cmd_start() {
    [ -x "$RABBIT_BIN/rabbitmq-server" ] || die "rabbitmq-server is not installed; run: $0 install"
    rabbit_env
    if node_pid >/dev/null; then
        amqp_answers || die "node $NODENAME already runs (pid $(node_pid)) but does not answer AMQP on port $PORT"
        log "already running: $NODENAME on 127.0.0.1:$PORT"
        return 0
    fi
    if amqp_answers; then
        die "something else already answers AMQP on 127.0.0.1:$PORT; choose GATEWAY_RABBITMQ_PORT"
    fi
    rm -f "$RABBITMQ_PID_FILE" "$DATA_DIR/epmd-started-here"
    if ! epmd_answers; then
        epmd -daemon -port "$ERL_EPMD_PORT" -address 127.0.0.1 </dev/null >/dev/null 2>&1 ||
            die "could not start epmd on 127.0.0.1:$ERL_EPMD_PORT"
        local i
        for i in $(seq 50); do epmd_answers && break; sleep 0.1; done
        epmd_answers || die "epmd does not answer on 127.0.0.1:$ERL_EPMD_PORT"
        touch "$DATA_DIR/epmd-started-here"
    fi
    local started=$EPOCHREALTIME
    log "starting $NODENAME on 127.0.0.1:$PORT (data in $DATA_DIR)"
    "$RABBIT_BIN/rabbitmq-server" -detached >"$RABBITMQ_LOG_BASE/startup.log" 2>&1 ||
        fail_start "rabbitmq-server -detached failed (see $RABBITMQ_LOG_BASE/startup.log)"
    # `rabbitmqctl wait` waits for the pid file, then for the rabbit application to boot.
    if ! timeout "$START_TIMEOUT" "$RABBIT_BIN/rabbitmqctl" --node "$NODENAME" wait \
        --timeout "$START_TIMEOUT" "$RABBITMQ_PID_FILE" >"$RABBITMQ_LOG_BASE/wait.log" 2>&1; then
        fail_start "$NODENAME did not start within ${START_TIMEOUT}s (see $RABBITMQ_LOG_BASE/wait.log)"
    fi
    local deadline=$((SECONDS + 30))
    until amqp_answers; do
        [ "$SECONDS" -lt "$deadline" ] || fail_start "$NODENAME booted but AMQP port $PORT does not answer"
        sleep 0.2
    done
    start_watchdog "$(node_pid)"
    log "$(awk -v a="$started" -v b="$EPOCHREALTIME" -v p="$PORT" \
        'BEGIN { printf "ready after %.1fs: amqp://guest:guest@127.0.0.1:%s/", b - a, p }')"
}

cmd_stop() {
    rabbit_env
    local pid
    if pid="$(node_pid)"; then
        log "stopping $NODENAME (pid $pid)"
        if ! timeout 60 "$RABBIT_BIN/rabbitmqctl" --node "$NODENAME" stop "$RABBITMQ_PID_FILE" \
            >"$RABBITMQ_LOG_BASE/stop.log" 2>&1; then
            log "rabbitmqctl stop failed (see $RABBITMQ_LOG_BASE/stop.log); sending SIGTERM to $pid"
            kill "$pid" 2>/dev/null || true
        fi
        local i
        for i in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            log "pid $pid still alive after 30s; sending SIGKILL"
            kill -9 "$pid" 2>/dev/null || true
        fi
    else
        log "$NODENAME is not running"
    fi
    rm -f "$RABBITMQ_PID_FILE"
    # Take down the epmd this script started once no node is registered with it any more.
    if [ -e "$DATA_DIR/epmd-started-here" ] && epmd_answers &&
        ! epmd -port "$ERL_EPMD_PORT" -names 2>/dev/null | grep -q '^name '; then
        epmd -port "$ERL_EPMD_PORT" -kill >/dev/null 2>&1 || true
    fi
    rm -f "$DATA_DIR/epmd-started-here"
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
    echo "usage: $0 {install|start|stop|status}" >&2
    exit 2
    ;;
esac
