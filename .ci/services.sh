# The throwaway services of a CI run, started and stopped in one place (sourced by .ci/run).
#
#   start_services   PostgreSQL (.ci/postgres.sh) and Orthanc (.ci/orthanc.sh): exports
#                    CXR_TEST_POSTGRES_URL, CXR_TEST_ORTHANC_URL & co. for the tests; a
#                    service that cannot start is left out (its tests skip).
#   stop_services    stops what start_services started, and only that (a server found
#                    already running was reused and is left running); run it from a trap
#                    on EXIT so that it also runs when the tests fail or the run is stopped.
#
#   private_netns    prints the command prefix (one word a line) that runs a command in a
#                    private network namespace with only loopback, or nothing (exit 1)
#                    when this machine refuses one (no unshare, no user namespaces).
#
# Ports come from the environment: CXR_PG_PORT (55432), CXR_ORTHANC_HTTP_PORT (58042),
# CXR_ORTHANC_DICOM_PORT (58104), CXR_LISTEN_PORT (58105). PostgreSQL listens on 127.0.0.1.
# Orthanc 1.10 (Debian 12) cannot choose its address and listens on every interface: .ci/run
# therefore starts the services and runs the tests inside `private_netns`, where the only
# interface is loopback, so no other host can reach either (see .ci/orthanc.sh for what
# Orthanc refuses when no namespace can be made).

CI_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

start_services() {
  local env_lines
  if env_lines="$(bash "$CI_DIR/postgres.sh")"; then
    eval "$env_lines"
  else
    echo "ci: PostgreSQL did not start; its tests skip" >&2
  fi
  if env_lines="$(bash "$CI_DIR/orthanc.sh")"; then
    eval "$env_lines"
  else
    echo "ci: Orthanc did not start; its tests skip" >&2
  fi
}

stop_services() {
  if [[ -n "${CXR_CI_ORTHANC_PID:-}" ]]; then
    kill "$CXR_CI_ORTHANC_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$CXR_CI_ORTHANC_PID" 2>/dev/null || break
      sleep 0.2
    done
    kill -9 "$CXR_CI_ORTHANC_PID" 2>/dev/null || true
    rm -rf "${CXR_CI_ORTHANC_ROOT:?}"
    echo "ci: stopped Orthanc (pid $CXR_CI_ORTHANC_PID)" >&2
    unset CXR_CI_ORTHANC_PID CXR_CI_ORTHANC_ROOT
  fi
  if [[ -n "${CXR_CI_PG_DATA:-}" ]]; then
    local as_pg=()
    [[ "$(id -u)" == "0" ]] && as_pg=(runuser -u postgres --)
    "${as_pg[@]}" "$CXR_CI_PG_BINDIR/pg_ctl" -D "$CXR_CI_PG_DATA/data" -m fast -w -t 60 stop \
      >/dev/null 2>&1 || echo "ci: could not stop PostgreSQL in $CXR_CI_PG_DATA" >&2
    rm -rf "${CXR_CI_PG_DATA:?}"
    echo "ci: stopped PostgreSQL" >&2
    unset CXR_CI_PG_DATA CXR_CI_PG_BINDIR
  fi
}

private_netns() {
  local prefix=()
  command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 || return 1
  if [[ "$(id -u)" == "0" ]]; then
    prefix=(unshare --net)
  else
    # A user namespace of one's own grants the right to bring its loopback up; mapped to
    # oneself (not root), so PostgreSQL still runs as the CI user.
    prefix=(unshare --user --map-current-user --keep-caps --net)
  fi
  "${prefix[@]}" ip link set lo up >/dev/null 2>&1 || return 1
  printf '%s\n' "${prefix[@]}"
}
