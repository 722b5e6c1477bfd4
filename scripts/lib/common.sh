# Shared by scripts/run, scripts/test and bench/: dependencies, build, embedded PostgreSQL.
# Source it; it defines functions only.

PAYLEDGER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PG_BIN="/usr/lib/postgresql/15/bin"

# Each line carries the time and the seconds since the calling script started (bash's SECONDS),
# so that a CI log shows what each stage cost.
payledger_log() { printf '[payledger %(%H:%M:%S)T +%ds] %s\n' -1 "$SECONDS" "$*" >&2; }

# Installs the Debian packages that are missing, quietly; does nothing when all are there.
payledger_install_deps() {
    local packages=(g++ cmake make ninja-build pkg-config openssl
        libboost1.81-dev libpqxx-dev nlohmann-json3-dev libgtest-dev libgmock-dev libssl-dev
        libcli11-dev libpugixml-dev zlib1g-dev libzip-dev postgresql-15 postgresql-client-15 wrk
        "$@")
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    payledger_log "installing: ${missing[*]}"
    local sudo=()
    [ "$(id -u)" -ne 0 ] && sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# build/ (scripts/run, scripts/test) is CMake's Release type, -O3, as a packager builds it, so
# that CI builds and tests the Release type with warnings as errors; with line tables only
# (-g1): enough for backtraces and perf, and a quarter less compile time than -g for the
# Beast-heavy files (api/http/server.cpp: 47.7 s with -O2 -g, 35.9 s with -O2 -g1, measured here).
# The sanitizer trees of scripts/test are RelWithDebInfo with flags of their own. Later -D
# arguments override these.
PAYLEDGER_RELEASE_FLAGS="-O3 -g1 -DNDEBUG"

# _payledger_configure DIR [cmake configure arguments...]: configures DIR with Ninja, which
# schedules the whole build as one graph (a target's files compile while the libraries it
# links are still being built; Make waits for them). A tree configured for another generator
# (Make, before) keeps its outputs but loses its cache, which CMake cannot switch.
_payledger_configure() {
    local dir="$1"
    shift
    if [ -f "$dir/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt"; then
        rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
    fi
    # Warnings are errors in every build of the project's own scripts, so CI stops on a new one
    # (plain CMake leaves them warnings: CMakeLists.txt).
    cmake -S "$PAYLEDGER_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CXX_FLAGS_RELEASE="$PAYLEDGER_RELEASE_FLAGS" \
        -DPAYLEDGER_WARNINGS_AS_ERRORS=ON "$@" >/dev/null
}

# payledger_build DIR [cmake configure arguments...]: configures and builds every target.
payledger_build() {
    local dir="$1"
    shift
    _payledger_configure "$dir" "$@"
    cmake --build "$dir" -j "$(nproc)"
}

# payledger_build_target DIR TARGET [cmake configure arguments...]: configures and builds one
# target (scripts/run; the ThreadSanitizer tree of scripts/test).
payledger_build_target() {
    local dir="$1" target="$2"
    shift 2
    _payledger_configure "$dir" "$@"
    cmake --build "$dir" -j "$(nproc)" --target "$target"
}

# PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user.
_pg_as() {
    if [ "$(id -u)" -eq 0 ]; then
        # From /: postgres may not be allowed into the caller's working directory.
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

# pg_init DATADIR: creates a cluster in DATADIR (trust auth on its own unix socket only).
payledger_pg_init() {
    local data="$1"
    mkdir -p "$data"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$data" && chmod 700 "$data"
    _pg_as "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
        >/dev/null
    cat >>"$data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$data'
max_connections = 200
shared_buffers = 256MB
fsync = on
synchronous_commit = on
idle_in_transaction_session_timeout = 60s
CONF
}

# pg_start DATADIR PORT: starts the cluster and waits until it accepts connections.
payledger_pg_start() {
    local data="$1" port="$2"
    _pg_as "$PG_BIN/pg_ctl" -D "$data" -o "-p $port" -l "$data/server.log" -w -t 60 start \
        >/dev/null
}

# pg_stop DATADIR: fast shutdown; quiet when it is not running.
payledger_pg_stop() {
    local data="$1"
    [ -f "$data/postmaster.pid" ] || return 0
    _pg_as "$PG_BIN/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
}

# pg_standby PRIMARY_DATADIR PRIMARY_PORT DATADIR: a streaming standby of that primary in
# DATADIR (pg_basebackup -R: standby.signal and primary_conninfo), its socket in its own folder
# and no synchronous_standby_names of its own (the primary's, copied, would make it wait for a
# standby of its own once promoted). Not started: pg_start it on a port of its own.
payledger_pg_standby() {
    local primary="$1" port="$2" data="$3"
    mkdir -p "$data"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$data" && chmod 700 "$data"
    _pg_as "$PG_BIN/pg_basebackup" -h "$primary" -p "$port" -U postgres -D "$data" -R \
        -X stream -c fast >/dev/null
    cat >>"$data/postgresql.conf" <<CONF
unix_socket_directories = '$data'
synchronous_standby_names = ''
CONF
}

# pg_url DATADIR PORT DBNAME: the libpq URL of a database on that socket.
payledger_pg_url() {
    printf 'postgresql://postgres@/%s?host=%s&port=%s' "$3" "$1" "$2"
}

# pg_createdb DATADIR PORT DBNAME: creates the database unless it exists.
payledger_pg_createdb() {
    local data="$1" port="$2" name="$3"
    if ! psql -h "$data" -p "$port" -U postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$name'" postgres | grep -q 1; then
        psql -h "$data" -p "$port" -U postgres -qc "CREATE DATABASE $name" postgres >/dev/null
    fi
}

# A TCP port nobody listens on, above the usual range of a system PostgreSQL and below the
# kernel's ephemeral ports: a port in that range can be taken meanwhile as the local end of
# some outgoing connection (the storm tests open thousands), and a later bind then fails.
payledger_free_port() {
    local port low=32768
    read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    local first=$((low > 22000 ? low - 12000 : 10000)) span=$((low > 22000 ? 12000 : low - 10000))
    [ "$span" -gt 100 ] || { first=10000; span=12000; }
    for _ in $(seq 1 100); do
        port=$((first + RANDOM % span))
        if ! ss -ltnH 2>/dev/null | awk '{print $4}' | grep -q ":$port\$" &&
            [ ! -e "/tmp/.s.PGSQL.$port" ]; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

# --- Where the embedded cluster lives -------------------------------------------------------
# PostgreSQL refuses to run as root, so as root it runs as `postgres`, which cannot reach a
# checkout in a private directory (/root is 0700, so is every mktemp -d). As root the cluster
# therefore lives under /var/lib/payledger/<checkout name>-<hash of its path>/pg, and
# .data/pg is a symbolic link to it: .data/ stays the one place to look. As any other user
# the cluster is .data/pg itself. A cluster that already exists at .data/pg is reused as it is.
PAYLEDGER_STATE_ROOT="${PAYLEDGER_STATE_ROOT:-/var/lib/payledger}"

# payledger_pg_home DATA_DIR: prints the cluster directory for DATA_DIR/pg, creating the
# link (and its target's parent) as root. Print only; the caller runs initdb when needed.
payledger_pg_home() {
    local data_dir="$1" link="$1/pg"
    if [ -L "$link" ]; then
        readlink -f "$link"
    elif [ -e "$link" ] || [ "$(id -u)" -ne 0 ]; then
        printf '%s\n' "$link"
    else
        local id target
        id="$(basename "$PAYLEDGER_ROOT")-$(printf '%s' "$PAYLEDGER_ROOT" | sha256sum | cut -c1-12)"
        target="$PAYLEDGER_STATE_ROOT/$id/pg"
        mkdir -p "$PAYLEDGER_STATE_ROOT/$id"
        chmod 755 "$PAYLEDGER_STATE_ROOT" "$PAYLEDGER_STATE_ROOT/$id"
        ln -s "$target" "$link"
        printf '%s\n' "$target"
    fi
}

# payledger_pg_running DATADIR: true when a postmaster runs on DATADIR (a stale
# postmaster.pid left by a crash does not count).
payledger_pg_running() {
    [ -f "$1/PG_VERSION" ] && _pg_as "$PG_BIN/pg_ctl" -D "$1" status >/dev/null 2>&1
}

# --- Stopping what a script started ---------------------------------------------------------
# payledger_supervise CMD...: runs CMD in a session of its own and waits for it. SIGTERM,
# SIGINT or SIGHUP to the calling script — from `kill`, `timeout`, a service manager or
# Ctrl-C — is passed on to CMD's whole process group as SIGTERM (an asynchronous command of
# a script starts with SIGINT ignored, so SIGINT would not reach it), and the wait goes on
# until CMD has finished; a second signal kills the group at once. Whatever is still left in CMD's group then is killed. Returns CMD's
# exit status, or 128 + the signal's number when a signal stopped the script; the caller
# exits with it. PAYLEDGER_SUPERVISED_STATUS is CMD's own status, PAYLEDGER_SUPERVISED_SIGNAL
# the signal's number (0 when none came).
payledger_supervise() {
    _payledger_signal=0
    _payledger_child=""
    # The traps first: a signal that comes before CMD has started is passed on once it has.
    trap '_payledger_forward 15' TERM
    trap '_payledger_forward 2' INT
    trap '_payledger_forward 1' HUP
    setsid "$@" &
    _payledger_child=$!
    [ "$_payledger_signal" -eq 0 ] || kill -TERM -- "-$_payledger_child" 2>/dev/null || true
    local status again
    while :; do
        _payledger_interrupted=""
        status=0
        wait "$_payledger_child" || status=$?
        [ -n "$_payledger_interrupted" ] || break
        # A trap ran: either it interrupted the wait (CMD still runs: wait again), or it ran
        # just after the wait had CMD's status (a second wait answers 127: keep the first).
        if ! kill -0 "$_payledger_child" 2>/dev/null; then
            again=0
            wait "$_payledger_child" 2>/dev/null || again=$?
            [ "$again" -eq 127 ] || status="$again"
            break
        fi
    done
    kill -KILL -- "-$_payledger_child" 2>/dev/null || true
    _payledger_child=""
    payledger_default_traps
    PAYLEDGER_SUPERVISED_STATUS="$status"
    PAYLEDGER_SUPERVISED_SIGNAL="$_payledger_signal"
    [ "$_payledger_signal" -eq 0 ] || return $((128 + _payledger_signal))
    return "$status"
}
_payledger_forward() {
    _payledger_interrupted=1
    if [ -z "$_payledger_child" ]; then
        _payledger_signal="$1"  # Not started yet: payledger_supervise passes it on.
        return 0
    fi
    if [ "$_payledger_signal" -ne 0 ]; then
        # A second signal (Ctrl-C twice): do not wait for a graceful stop any longer.
        kill -KILL -- "-$_payledger_child" 2>/dev/null || true
        return 0
    fi
    _payledger_signal="$1"
    kill -TERM -- "-$_payledger_child" 2>/dev/null || true
}

# payledger_default_traps: outside payledger_supervise, a signal ends the script at once
# with 128 + its number; the script's EXIT trap then stops what it started.
payledger_default_traps() {
    trap 'exit 143' TERM
    trap 'exit 130' INT
    trap 'exit 129' HUP
}
