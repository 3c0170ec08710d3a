#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the test suite (called by .ci/run).
#
# Installs Debian's postgresql package when it is missing, creates a cluster in a
# temporary directory owned by the `postgres` user (trust auth, listening on 127.0.0.1
# only), starts it on 127.0.0.1:${CXR_PG_PORT:-55432} and creates role `cxr` and
# database `cxr_test`. Prints the environment to export on stdout
# (`eval "$(bash .ci/postgres.sh)"`): CXR_TEST_POSTGRES_URL, and CXR_CI_PG_DATA and
# CXR_CI_PG_BINDIR when this call started the server (so that its caller stops it:
# .ci/services.sh); a server found already running is reused and left alone. Exits
# non-zero if any step fails, so .ci/run can skip the PostgreSQL tests instead of running
# them against nothing.
set -euo pipefail

PORT="${CXR_PG_PORT:-55432}"

find_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then echo "$d"; fi
  done | sort -V | tail -n 1
}

BINDIR="$(find_bindir || true)"
if [[ -z "$BINDIR" ]]; then
  echo "postgres.sh: installing Debian's postgresql package" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >/dev/null
  BINDIR="$(find_bindir)"
fi
if [[ -z "$BINDIR" ]]; then
  echo "postgres.sh: no initdb/pg_ctl found after installing postgresql" >&2
  exit 1
fi

# Already running from an earlier call (e.g. a developer re-running .ci/run)?
if "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
  echo "postgres.sh: a server already answers on 127.0.0.1:$PORT; reusing it" >&2
else
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
  PGDATA_ROOT="$(mktemp -d /tmp/cxr-pg.XXXXXX)"
  chown postgres "$PGDATA_ROOT"
  as_pg() { if [[ "$(id -u)" == "0" ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
  as_pg "$BINDIR/initdb" -D "$PGDATA_ROOT/data" -U postgres --auth=trust -E UTF8 >/dev/null
  # Failing from here on, stop the server just started: no caller knows its folder yet.
  trap 'status=$?; if [[ $status -ne 0 ]]; then as_pg "$BINDIR/pg_ctl" -D "$PGDATA_ROOT/data" -m fast -w stop >/dev/null 2>&1; rm -rf "$PGDATA_ROOT"; fi' EXIT
  as_pg "$BINDIR/pg_ctl" -D "$PGDATA_ROOT/data" -l "$PGDATA_ROOT/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PGDATA_ROOT -c fsync=off" start >/dev/null
  echo "postgres.sh: started PostgreSQL ($BINDIR) on 127.0.0.1:$PORT, data in $PGDATA_ROOT" >&2
  echo "export CXR_CI_PG_DATA=$PGDATA_ROOT"
  echo "export CXR_CI_PG_BINDIR=$BINDIR"
fi

psql_pg() { psql -v ON_ERROR_STOP=1 -q -h 127.0.0.1 -p "$PORT" -U postgres "$@"; }
if [[ -z "$(psql_pg -d postgres -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'cxr'")" ]]; then
  psql_pg -d postgres -c "CREATE ROLE cxr LOGIN" >&2
fi
if [[ -z "$(psql_pg -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'cxr_test'")" ]]; then
  psql_pg -d postgres -c "CREATE DATABASE cxr_test OWNER cxr" >&2
fi
psql -v ON_ERROR_STOP=1 -q -h 127.0.0.1 -p "$PORT" -U cxr -d cxr_test -tAc "SELECT 1" >/dev/null
echo "postgres.sh: ready: postgresql+psycopg://cxr@127.0.0.1:$PORT/cxr_test" >&2
echo "export CXR_TEST_POSTGRES_URL=postgresql+psycopg://cxr@127.0.0.1:$PORT/cxr_test"
