#!/usr/bin/env bash
# A live Citus cluster on loopback — a coordinator and two workers — and the
# check that runs navd's Kafka and API integration tests and the demo book
# against it. Needs the Citus extension installed into the local PostgreSQL
# (deploy/citus/build.sh builds it); a fresh CI machine has none, so this is
# not part of .ci/run.
#
#   deploy/citus/cluster.sh start [DIR]   start the three nodes, print the coordinator URL
#   deploy/citus/cluster.sh stop  [DIR]   stop them
#   deploy/citus/cluster.sh db NAME [DIR] a database NAME on every node, navd's schema
#                                         migrated and distributed by deploy/citus.sql;
#                                         prints its URL (for navd serve or navd-bench --database-url);
#                                         NAVD_BIN=PATH migrates with that executable
#                                         instead of building one
#   deploy/citus/cluster.sh drop NAME [DIR] drop database NAME from every node (each database
#                                         keeps a Citus maintenance daemon busy on every
#                                         node: drop bench databases after their runs)
#   deploy/citus/cluster.sh check         start, run the checks, stop; exit status = outcome
#
# The nodes keep PostgreSQL's durable defaults (fsync, synchronous_commit):
# the throughput figures taken on this cluster compare with the bench's
# single-node figures. Ports: NAVD_CITUS_PORT (default 55432) and the next two.
set -euo pipefail

cmd=${1:-check}
if [ "$cmd" = db ] || [ "$cmd" = drop ]; then
  name=${2:?usage: $0 $cmd NAME [DIR]}
  shift
fi
dir=${2:-${TMPDIR:-/tmp}/navd-citus}
base_port=${NAVD_CITUS_PORT:-55432}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bindir/initdb" ] || { echo "PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 2; }
if [ ! -f "$("$bindir/pg_config" --pkglibdir 2>/dev/null || pg_config --pkglibdir)/citus.so" ]; then
  echo "the Citus extension is not installed into this PostgreSQL: build it first with deploy/citus/build.sh (as root)" >&2
  exit 2
fi

# PostgreSQL refuses to run as root; then the nodes run as the postgres user.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

node_names=(coordinator worker1 worker2)

start() {
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  local i=0
  for n in "${node_names[@]}"; do
    local port=$((base_port + i)) data="$dir/$n"
    if [ ! -d "$data" ]; then
      as_pg "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >/dev/null
      cat >>"$data/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
# pg_stat_statements: the per-statement figures of docs/scaling.md are read
# from it on the coordinator and on each worker.
shared_preload_libraries = 'citus,pg_stat_statements'
max_prepared_transactions = 200
max_connections = 1000
# The tests make a database each: a Citus maintenance daemon per database,
# and connections cached from coordinator backends to the workers.
max_worker_processes = 256
citus.shard_count = 32
EOF
    fi
    as_pg "$bindir/pg_ctl" -D "$data" -l "$dir/$n.log" -w start >/dev/null
    i=$((i + 1))
  done
  psql_c 0 postgres -c "CREATE EXTENSION IF NOT EXISTS citus" >/dev/null
  psql_c 1 postgres -c "CREATE EXTENSION IF NOT EXISTS citus" >/dev/null
  psql_c 2 postgres -c "CREATE EXTENSION IF NOT EXISTS citus" >/dev/null
  psql_c 0 postgres -c "SELECT citus_set_coordinator_host('127.0.0.1', $base_port)" >/dev/null
  for w in 1 2; do
    psql_c 0 postgres -c "SELECT citus_add_node('127.0.0.1', $((base_port + w)))
                           WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE nodeport = $((base_port + w)))" >/dev/null
  done
  echo "postgres://postgres@127.0.0.1:$base_port/postgres"
}

stop() {
  for n in "${node_names[@]}"; do
    [ -d "$dir/$n" ] && as_pg "$bindir/pg_ctl" -D "$dir/$n" -m fast stop >/dev/null 2>&1 || true
  done
}

psql_c() {
  local node=$1 db=$2
  shift 2
  psql -X -q -v ON_ERROR_STOP=1 "postgres://postgres@127.0.0.1:$((base_port + node))/$db" "$@"
}

# Drops database NAME from every node, the workers first; WITH (FORCE)
# ends the coordinator's cached connections to them.
drop_db() {
  local name=$1
  for node in 2 1 0; do
    psql_c "$node" postgres -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" >/dev/null
  done
}

# A database NAME on every node with Citus, the workers added, navd's
# migrations, then deploy/citus.sql as an operator runs it. Prints its URL.
prepare_db() {
  local name=$1
  for w in 1 2; do
    psql_c "$w" postgres -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
    psql_c "$w" "$name" -c "CREATE EXTENSION citus" >/dev/null
  done
  psql_c 0 postgres -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
  psql_c 0 "$name" -c "CREATE EXTENSION citus" \
    -c "SELECT citus_set_coordinator_host('127.0.0.1', $base_port)" \
    -c "SELECT citus_add_node('127.0.0.1', $((base_port + 1)))" \
    -c "SELECT citus_add_node('127.0.0.1', $((base_port + 2)))" >/dev/null
  local url="postgres://postgres@127.0.0.1:$base_port/$name"
  # NAVD_BIN: an executable already built (a bench's), instead of building one.
  local navd=${NAVD_BIN:-}
  if [ -z "$navd" ]; then
    (cd "$repo" && cargo build --release --bin navd -q)
    navd=$repo/target/release/navd
  fi
  DATABASE_URL=$url "$navd" migrate >/dev/null
  psql_c 0 "$name" -f "$repo/deploy/citus.sql" >/dev/null
  echo "$url"
}

check() {
  rm -rf "$dir"
  trap stop EXIT
  local url
  url=$(start)
  echo "citus cluster: coordinator $url, workers on $((base_port + 1)) and $((base_port + 2))"
  psql_c 0 postgres -Atc "SELECT citus_version()"
  cd "$repo"
  # The integration tests: each test gets a database of its own on all three
  # nodes, migrated and distributed with deploy/citus.sql (tests/common).
  # kafka.rs includes the demo's book through the broker
  # (the_demo_book_through_the_broker) and two `navd serve` in one group
  # compared with one consumer on single-node PostgreSQL; feed_relay the
  # relay's claim shard by shard.
  NAVD_TEST_CITUS_URL=$url cargo test --release --test kafka --test api --test feed_relay -- --test-threads 2
  echo "citus check: passed"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  check) check ;;
  db) prepare_db "$name" ;;
  drop) drop_db "$name" ;;
  *) echo "usage: $0 start|stop|check [DIR], db|drop NAME [DIR]" >&2; exit 2 ;;
esac
