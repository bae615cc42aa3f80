#!/usr/bin/env bash
# Redis and PostgreSQL for the tests that need real servers (CI runs them; so can you, as root).
#
#   bash scripts/test-servers.sh install     # apt packages redis-server and postgresql, when missing
#   bash scripts/test-servers.sh start       # both, on 127.0.0.1 only, in $KERNELRANK_TEST_SERVERS_DIR
#   bash scripts/test-servers.sh envfile     # prints the path of the file of KERNELRANK_TEST_* exports
#   bash scripts/test-servers.sh stop        # both (data kept until `clean`)
#   bash scripts/test-servers.sh redis-stop|redis-start|redis-kill|pg-stop|pg-start   # fault tests
#   bash scripts/test-servers.sh clean       # stop and delete the data folder
#
# Non-default ports (KERNELRANK_TEST_REDIS_PORT, default 16379; KERNELRANK_TEST_PG_PORT, default
# 15432), a data folder of their own (default /tmp/kernelrank-test-servers), passwords generated
# on the first start and never printed (kept in files readable by root only). Redis keeps every
# write in its append-only file (fsync always: a killed broker loses nothing) and never evicts.
# PostgreSQL runs as the user postgres (it refuses root) from its own cluster folder.
set -euo pipefail

dir="${KERNELRANK_TEST_SERVERS_DIR:-/tmp/kernelrank-test-servers}"
redis_port="${KERNELRANK_TEST_REDIS_PORT:-16379}"
pg_port="${KERNELRANK_TEST_PG_PORT:-15432}"
pg_bin="${KERNELRANK_TEST_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"

die() { echo "test-servers: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (the servers run as the users redis and postgres)"

secret() {  # $1: file; creates it with a fresh random password on first use
  if [ ! -s "$1" ]; then
    (umask 077; python3 -c "import secrets; print(secrets.token_hex(24))" > "$1")
  fi
  cat "$1"
}

install() {
  if command -v redis-server >/dev/null && [ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ]; then
    return
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server postgresql >/dev/null
  pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
}

redis_start() {
  local pw; pw="$(secret "$dir/redis.password")"
  mkdir -p "$dir/redis"
  (umask 077; cat > "$dir/redis/redis.conf" <<EOF
bind 127.0.0.1
protected-mode yes
port $redis_port
dir $dir/redis
daemonize yes
pidfile $dir/redis/redis.pid
logfile $dir/redis/redis.log
requirepass $pw
appendonly yes
appendfsync always
maxmemory-policy noeviction
save ""
EOF
  )
  chown -R redis:redis "$dir/redis"
  chmod 700 "$dir/redis"
  if redis_ping; then return; fi
  runuser -u redis -- redis-server "$dir/redis/redis.conf"
  for _ in $(seq 100); do redis_ping && return; sleep 0.1; done
  die "redis did not start; see $dir/redis/redis.log"
}

redis_ping() {
  REDISCLI_AUTH="$(cat "$dir/redis.password")" redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null | grep -q PONG
}

redis_stop() {  # a clean shutdown (the append-only file is complete)
  if redis_ping; then
    REDISCLI_AUTH="$(cat "$dir/redis.password")" redis-cli -h 127.0.0.1 -p "$redis_port" shutdown >/dev/null 2>&1 || true
  fi
  for _ in $(seq 100); do redis_ping || return 0; sleep 0.1; done
  die "redis did not stop"
}

redis_kill() {  # a crash: SIGKILL, no shutdown
  if [ -s "$dir/redis/redis.pid" ]; then kill -KILL "$(cat "$dir/redis/redis.pid")" 2>/dev/null || true; fi
  for _ in $(seq 100); do redis_ping || return 0; sleep 0.1; done
  die "redis did not die"
}

pg() { runuser -u postgres -- "$pg_bin/$1" "${@:2}"; }

pg_start() {
  local pw; pw="$(secret "$dir/pg.password")"
  mkdir -p "$dir/pg"
  chown postgres:postgres "$dir/pg"
  chmod 700 "$dir/pg"
  if [ ! -s "$dir/pg/data/PG_VERSION" ]; then
    local pwfile="$dir/pg/superuser.pw"
    (umask 077; python3 -c "import secrets; print(secrets.token_hex(24))" > "$pwfile")
    chown postgres:postgres "$pwfile"
    pg initdb -D "$dir/pg/data" -U postgres --pwfile="$pwfile" --auth-local=peer --auth-host=scram-sha-256 \
       -E UTF8 --locale=C.UTF-8 >"$dir/pg/initdb.log" 2>&1 || die "initdb failed; see $dir/pg/initdb.log"
    rm -f "$pwfile"
    mkdir -p "$dir/pg/socket"; chown postgres:postgres "$dir/pg/socket"
  fi
  if ! pg pg_ctl -D "$dir/pg/data" status >/dev/null 2>&1; then
    pg pg_ctl -D "$dir/pg/data" -l "$dir/pg/server.log" -w -t 60 \
       -o "-p $pg_port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir/pg/socket -c fsync=on" \
       start >/dev/null || die "postgres did not start; see $dir/pg/server.log"
  fi
  # the tests' role: may create a database per test; its password is set on every start (no echo)
  pg psql -h "$dir/pg/socket" -p "$pg_port" -U postgres -d postgres -v ON_ERROR_STOP=1 -q \
     -v pw="$pw" >/dev/null <<'SQL'
SELECT 'CREATE ROLE kernelrank LOGIN CREATEDB' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'kernelrank')
\gexec
ALTER ROLE kernelrank PASSWORD :'pw';
-- each test drops its database WITH (FORCE), which must end every session in it, autovacuum's
-- workers (no role) included: without this a drop racing autovacuum fails the test's teardown
GRANT pg_signal_backend TO kernelrank;
SELECT 'CREATE DATABASE kernelrank OWNER kernelrank' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'kernelrank')
\gexec
SQL
}

pg_stop() {
  if [ -s "$dir/pg/data/PG_VERSION" ] && pg pg_ctl -D "$dir/pg/data" status >/dev/null 2>&1; then
    pg pg_ctl -D "$dir/pg/data" -m fast -w -t 60 stop >/dev/null
  fi
}

write_env() {
  local rpw ppw
  rpw="$(cat "$dir/redis.password")"; ppw="$(cat "$dir/pg.password")"
  (umask 077; cat > "$dir/env" <<EOF
export KERNELRANK_TEST_SERVERS_DIR='$dir'
export KERNELRANK_TEST_REDIS_URL='redis://:$rpw@127.0.0.1:$redis_port/0'
export KERNELRANK_TEST_DATABASE_URL='postgresql+psycopg://kernelrank:$ppw@127.0.0.1:$pg_port/kernelrank'
EOF
  )
}

mkdir -p "$dir"; chmod 755 "$dir"
case "${1:-}" in
  install) install ;;
  start) install; redis_start; pg_start; write_env; echo "test-servers: redis on 127.0.0.1:$redis_port, postgres on 127.0.0.1:$pg_port; env in $dir/env" >&2 ;;
  stop) redis_stop; pg_stop ;;
  envfile) [ -s "$dir/env" ] || die "not started (run: $0 start)"; echo "$dir/env" ;;
  redis-start) redis_start ;;
  redis-stop) redis_stop ;;
  redis-kill) redis_kill ;;
  pg-start) pg_start ;;
  pg-stop) pg_stop ;;
  clean) redis_stop || true; pg_stop || true; rm -rf "$dir" ;;
  *) die "usage: $0 install|start|stop|envfile|redis-start|redis-stop|redis-kill|pg-start|pg-stop|clean" ;;
esac
