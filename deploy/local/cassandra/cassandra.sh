#!/usr/bin/env bash
# A single-node Apache Cassandra 5.0 on loopback, from its Maven Central artifacts, on Java 17.
#
#   deploy/local/cassandra/cassandra.sh install  # mvn: cassandra-all + runtime deps into lib/<version>/
#   deploy/local/cassandra/cassandra.sh start    # start in the background, wait until CQL answers
#   deploy/local/cassandra/cassandra.sh status   # exit 0 when the node answers a CQL query
#   deploy/local/cassandra/cassandra.sh stop     # SIGTERM (drains), SIGKILL after 60 s
#   deploy/local/cassandra/cassandra.sh run      # in the foreground, logging to stdout (images)
#
# Environment (all optional):
#   GATEWAY_CASSANDRA_NATIVE_PORT    CQL native transport port       (default 9042)
#   GATEWAY_CASSANDRA_STORAGE_PORT   inter-node storage port          (default 7000)
#   GATEWAY_CASSANDRA_DATA_DIR       data, commitlog, logs, conf      (default deploy/local/.data/cassandra-<port>)
#   GATEWAY_CASSANDRA_LISTEN_ADDRESS inter-node address; auto = this host name's address
#                                                                     (default 127.0.0.1)
#   GATEWAY_CASSANDRA_RPC_ADDRESS    CQL address; 0.0.0.0 = all, announcing the listen address
#                                                                     (default: the listen address)
#   GATEWAY_CASSANDRA_HEAP           maximum heap                     (default 1g; initial 512m)
#   GATEWAY_CASSANDRA_START_TIMEOUT  seconds to wait for CQL          (default 180)
#   GATEWAY_CASSANDRA_VERSION        org.apache.cassandra:cassandra-all version (default: pom.xml)
#   JAVA                             java binary (Java 17)            (default: java on PATH)
#   GATEWAY_SERVER_OWNER_PID         stop the node when this process exits (the test fixtures)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"

NATIVE_PORT="${GATEWAY_CASSANDRA_NATIVE_PORT:-9042}"
STORAGE_PORT="${GATEWAY_CASSANDRA_STORAGE_PORT:-7000}"
DATA_DIR="${GATEWAY_CASSANDRA_DATA_DIR:-$HERE/../.data/cassandra-$NATIVE_PORT}"
LISTEN_ADDRESS="${GATEWAY_CASSANDRA_LISTEN_ADDRESS:-127.0.0.1}"
if [ "$LISTEN_ADDRESS" = auto ]; then # a container: the address its network gave it
    LISTEN_ADDRESS="$(python3 -c 'import socket; print(socket.gethostbyname(socket.gethostname()))')"
fi
RPC_ADDRESS="${GATEWAY_CASSANDRA_RPC_ADDRESS:-$LISTEN_ADDRESS}"
CQL_HOST="$RPC_ADDRESS"
[ "$RPC_ADDRESS" != 0.0.0.0 ] || CQL_HOST=127.0.0.1
HEAP="${GATEWAY_CASSANDRA_HEAP:-1g}"
START_TIMEOUT="${GATEWAY_CASSANDRA_START_TIMEOUT:-180}"
VERSION="${GATEWAY_CASSANDRA_VERSION:-$(sed -n 's:.*<cassandra.version>\(.*\)</cassandra.version>.*:\1:p' "$HERE/pom.xml")}"
JAVA="${JAVA:-java}"
LIB_DIR="$HERE/lib/$VERSION"

die() {
    echo "cassandra.sh: error: $*" >&2
    exit 1
}
log() { echo "cassandra.sh: $*" >&2; }

paths() {
    DATA_DIR="$(mkdir -p "$DATA_DIR" && cd "$DATA_DIR" && pwd)"
    CONF_DIR="$DATA_DIR/conf"
    LOG_DIR="$DATA_DIR/log"
    PID_FILE="$DATA_DIR/cassandra.pid"
}

cql_answers() { python3 "$HERE/cql_ping.py" "$CQL_HOST" "$NATIVE_PORT" 2>/dev/null; }

port_open() {
    python3 -c 'import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
except OSError:
    sys.exit(1)' "$1"
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

node_pid() {
    local pid
    [ -s "$PID_FILE" ] || return 1
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

cmd_install() {
    command -v "$JAVA" >/dev/null 2>&1 || die "java not found; install a Java 17 JDK/JRE (apt-get install openjdk-17-jre-headless)"
    if [ -f "$LIB_DIR/cassandra-all-$VERSION.jar" ] && [ -f "$LIB_DIR/.complete-$VERSION" ]; then
        return 0
    fi
    command -v mvn >/dev/null 2>&1 || die "mvn not found; install Maven (apt-get install maven)"
    mkdir -p "$HERE/lib"
    # One install at a time (parallel test sessions on a fresh checkout).
    exec 9>"$HERE/lib/.install.lock"
    flock -w 1800 9 || die "timed out waiting for another install ($HERE/lib/.install.lock)"
    if [ -f "$LIB_DIR/.complete-$VERSION" ]; then
        return 0
    fi
    log "resolving org.apache.cassandra:cassandra-all:$VERSION and its dependencies into $LIB_DIR"
    rm -rf "$LIB_DIR" # an earlier install that did not finish
    mvn -q -B -f "$HERE/pom.xml" -Dcassandra.version="$VERSION" dependency:copy-dependencies >&2 ||
        die "mvn dependency:copy-dependencies failed (is Maven Central reachable?)"
    [ -f "$LIB_DIR/cassandra-all-$VERSION.jar" ] || die "mvn did not produce $LIB_DIR/cassandra-all-$VERSION.jar"
    touch "$LIB_DIR/.complete-$VERSION"
}

write_config() {
    mkdir -p "$CONF_DIR" "$LOG_DIR" "$DATA_DIR"/{data,commitlog,saved_caches,hints,cdc_raw,triggers}
    local broadcast="# broadcast_rpc_address: the rpc_address"
    [ "$RPC_ADDRESS" != 0.0.0.0 ] || broadcast="broadcast_rpc_address: $LISTEN_ADDRESS"
    sed -e "s|@DATA_DIR@|$DATA_DIR|g" -e "s|@NATIVE_PORT@|$NATIVE_PORT|g" \
        -e "s|@STORAGE_PORT@|$STORAGE_PORT|g" -e "s|@LISTEN_ADDRESS@|$LISTEN_ADDRESS|g" \
        -e "s|@RPC_ADDRESS@|$RPC_ADDRESS|g" -e "s|@BROADCAST_RPC_ADDRESS@|$broadcast|g" \
        "$HERE/cassandra.yaml.template" >"$CONF_DIR/cassandra.yaml"
    cp "$HERE/logback.xml" "$CONF_DIR/logback.xml"
}

java_options() {
    JVM_OPTS=(
        -Xms512m "-Xmx$HEAP" -Xss256k
        -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1
        -XX:G1RSetUpdatingPauseTimePercent=5 -XX:MaxGCPauseMillis=300
        -XX:+UseThreadPriorities -XX:+PerfDisableSharedMem
        -XX:+HeapDumpOnOutOfMemoryError "-XX:HeapDumpPath=$LOG_DIR" -XX:+ExitOnOutOfMemoryError
        -ea -da:net.openhft...
        -Djava.net.preferIPv4Stack=true
        -Djdk.attach.allowAttachSelf=true
        -Dio.netty.tryReflectionSetAccessible=true
        -Dio.netty.allocator.useCacheForAllThreads=true
        -Dio.netty.allocator.maxOrder=11
        # Java 17 module access, as in Cassandra's conf/jvm17-server.options
        --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
        --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
        --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
        --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
        --add-exports java.sql/java.sql=ALL-UNNAMED
        --add-exports java.base/java.lang.ref=ALL-UNNAMED
        --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
        --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
        --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
        --add-opens java.base/java.lang.module=ALL-UNNAMED
        --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
        --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
        --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
        --add-opens java.base/jdk.internal.math=ALL-UNNAMED
        --add-opens java.base/jdk.internal.module=ALL-UNNAMED
        --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
        --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
        --add-opens java.base/sun.nio.ch=ALL-UNNAMED
        --add-opens java.base/java.io=ALL-UNNAMED
        --add-opens java.base/java.lang.reflect=ALL-UNNAMED
        --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
        --add-opens java.base/java.lang=ALL-UNNAMED
        --add-opens java.base/java.util=ALL-UNNAMED
        --add-opens java.base/java.nio=ALL-UNNAMED
        # Where things are
        "-Dcassandra.config=file://$CONF_DIR/cassandra.yaml"
        "-Dcassandra.storagedir=$DATA_DIR"
        "-Dcassandra.logdir=$LOG_DIR"
        "-Dlogback.configurationFile=file://$CONF_DIR/logback.xml"
        "-Dcassandra.triggers_dir=$DATA_DIR/triggers"
        -Dcassandra-foreground=yes
        # Start fast: a lone seed node has nobody to wait for
        -Dcassandra.skip_wait_for_gossip_to_settle=0
        -Dcassandra.ring_delay_ms=100
        -Dcassandra.superuser_setup_delay_ms=0
        -Dcassandra.available_processors=2
    )
}

fail_start() {
    log "$1"
    local f
    for f in "$LOG_DIR/stdout.log" "$LOG_DIR/system.log"; do
        [ -f "$f" ] || continue
        log "--- last lines of $f"
        tail -n 40 "$f" >&2
    done
    cmd_stop || true # leave nothing half-started behind
    exit 1
}

cmd_start() {
    command -v "$JAVA" >/dev/null 2>&1 || die "java not found (Java 17 is needed)"
    [ -f "$LIB_DIR/cassandra-all-$VERSION.jar" ] || die "Cassandra jars missing in $LIB_DIR; run: $0 install"
    paths
    if node_pid >/dev/null; then
        cql_answers >/dev/null || die "node already runs (pid $(node_pid)) but CQL port $NATIVE_PORT does not answer"
        log "already running on $CQL_HOST:$NATIVE_PORT"
        return 0
    fi
    local p
    for p in "$NATIVE_PORT" "$STORAGE_PORT"; do
        ! port_open "$p" || die "port $p is already in use; choose GATEWAY_CASSANDRA_NATIVE_PORT / _STORAGE_PORT"
    done
    write_config
    java_options
    local started=$EPOCHREALTIME
    log "starting Cassandra $VERSION on $CQL_HOST:$NATIVE_PORT (data in $DATA_DIR)"
    # setsid: its own session, so the terminal's signals do not reach it; stopped via the pid file.
    setsid "$JAVA" "${JVM_OPTS[@]}" -cp "$LIB_DIR/*" org.apache.cassandra.service.CassandraDaemon \
        </dev/null >>"$LOG_DIR/stdout.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$PID_FILE"
    local deadline=$((SECONDS + START_TIMEOUT)) version=""
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$PID_FILE"
            fail_start "Cassandra exited during start-up"
        fi
        if version="$(cql_answers)"; then break; fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            fail_start "CQL port $NATIVE_PORT did not answer within ${START_TIMEOUT}s; stopping it"
        fi
        sleep 1
    done
    start_watchdog "$pid"
    log "$(awk -v a="$started" -v b="$EPOCHREALTIME" -v v="$version" -v p="$CQL_HOST:$NATIVE_PORT" \
        'BEGIN { printf "Cassandra %s ready after %.1fs on %s (CQL)", v, b - a, p }')"
}

# In the foreground (the container image's entry point): warnings and errors on stdout, the
# rest in <log dir>/system.log; stops (draining) on SIGTERM.
cmd_run() {
    command -v "$JAVA" >/dev/null 2>&1 || die "java not found (Java 17 is needed)"
    [ -f "$LIB_DIR/cassandra-all-$VERSION.jar" ] || die "Cassandra jars missing in $LIB_DIR; run: $0 install"
    paths
    write_config
    java_options
    log "running Cassandra $VERSION: CQL on $RPC_ADDRESS:$NATIVE_PORT, data in $DATA_DIR"
    exec "$JAVA" "${JVM_OPTS[@]}" -cp "$LIB_DIR/*" org.apache.cassandra.service.CassandraDaemon
}

cmd_stop() {
    paths
    local pid
    if ! pid="$(node_pid)"; then
        log "not running"
        rm -f "$PID_FILE"
        return 0
    fi
    log "stopping Cassandra (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 600); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "pid $pid still alive after 60s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$PID_FILE"
}

cmd_status() {
    paths
    local version
    if node_pid >/dev/null && version="$(cql_answers)"; then
        echo "cassandra $version running (pid $(node_pid)) on $CQL_HOST:$NATIVE_PORT"
        return 0
    fi
    echo "cassandra not running on $CQL_HOST:$NATIVE_PORT"
    return 1
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
run) cmd_run ;;
*)
    echo "usage: $0 {install|start|stop|status|run}" >&2
    exit 2
    ;;
esac
