#!/usr/bin/env bash
# Start a throwaway Orthanc PACS with DICOMweb for the integration tests (called by .ci/run).
#
# Uses Debian's `orthanc` and `orthanc-dicomweb` packages (installed here when missing),
# a private config and storage folder in a temporary directory, for loopback clients only.
# Orthanc 1.10 (Debian 12) cannot choose the address it listens on, so its ports are open on
# every interface of its network namespace: .ci/run starts it in a private one whose only
# interface is loopback (private_netns in .ci/services.sh). Where no namespace can be made,
# what reaches it from elsewhere is refused: HTTP answers only loopback
# clients (RemoteAccessAllowed false), and DICOM accepts echo only, from anyone; a store,
# find, get or move only from a registered modality calling from its registered host
# (127.0.0.1). Ports come from the environment:
#   HTTP (REST + DICOMweb at /dicom-web) on 127.0.0.1:${CXR_ORTHANC_HTTP_PORT:-58042}
#   DICOM (AE title ORTHANC)            on 127.0.0.1:${CXR_ORTHANC_DICOM_PORT:-58104}
#   basic auth: user cxr, password cxr-test
#   DicomModalities "cxr-listen": `cxr listen` as CXRLISTEN on 127.0.0.1:${CXR_LISTEN_PORT:-58105}
# Prints the environment to export on stdout (`eval "$(bash .ci/orthanc.sh)"`), with
# CXR_CI_ORTHANC_PID and CXR_CI_ORTHANC_ROOT when this call started Orthanc (its caller stops
# it: .ci/services.sh); an Orthanc found already answering is reused and left alone. Exits
# non-zero if any step fails, so .ci/run can skip the Orthanc tests instead.
set -euo pipefail

HTTP_PORT="${CXR_ORTHANC_HTTP_PORT:-58042}"
DICOM_PORT="${CXR_ORTHANC_DICOM_PORT:-58104}"
LISTEN_PORT="${CXR_LISTEN_PORT:-58105}"
USER_NAME=cxr
USER_PASSWORD=cxr-test
PLUGIN=/usr/share/orthanc/plugins/libOrthancDicomWeb.so

if [[ ! -x /usr/sbin/Orthanc || ! -e "$PLUGIN" ]]; then
  echo "orthanc.sh: installing Debian's orthanc and orthanc-dicomweb packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends orthanc orthanc-dicomweb >/dev/null
fi
if [[ ! -x /usr/sbin/Orthanc || ! -e "$PLUGIN" ]]; then
  echo "orthanc.sh: /usr/sbin/Orthanc or $PLUGIN missing after install" >&2
  exit 1
fi

answers() {
  curl -fsS -m 2 -u "$USER_NAME:$USER_PASSWORD" "http://127.0.0.1:$HTTP_PORT/system" >/dev/null 2>&1
}

if answers; then
  echo "orthanc.sh: an Orthanc already answers on 127.0.0.1:$HTTP_PORT; reusing it" >&2
else
  ROOT="$(mktemp -d /tmp/cxr-orthanc.XXXXXX)"
  mkdir -p "$ROOT/db"
  cat >"$ROOT/orthanc.json" <<EOF
{
  "Name": "cxr-ci-orthanc",
  "StorageDirectory": "$ROOT/db",
  "IndexDirectory": "$ROOT/db",
  "Plugins": ["$PLUGIN"],
  "HttpServerEnabled": true,
  "HttpPort": $HTTP_PORT,
  "RemoteAccessAllowed": false,
  "AuthenticationEnabled": true,
  "RegisteredUsers": {"$USER_NAME": "$USER_PASSWORD"},
  "DicomServerEnabled": true,
  "DicomAet": "ORTHANC",
  "DicomPort": $DICOM_PORT,
  "DicomCheckModalityHost": true,
  "DicomAlwaysAllowEcho": true,
  "DicomAlwaysAllowStore": false,
  "DicomAlwaysAllowFind": false,
  "DicomAlwaysAllowFindWorklist": false,
  "DicomAlwaysAllowGet": false,
  "DicomAlwaysAllowMove": false,
  "DicomModalities": {
    "cxr-listen": {"AET": "CXRLISTEN", "Host": "127.0.0.1", "Port": $LISTEN_PORT}
  },
  "DicomModalitiesInDatabase": false,
  "OverwriteInstances": true,
  "StableAge": 1,
  "SaveJobs": false,
  "DicomWeb": {"Enable": true, "Root": "/dicom-web/", "EnableWado": true, "Ssl": false}
}
EOF
  nohup /usr/sbin/Orthanc "$ROOT/orthanc.json" >"$ROOT/orthanc.log" 2>&1 &
  echo $! >"$ROOT/orthanc.pid"
  # Failing from here on, stop the Orthanc just started: no caller knows its pid yet.
  trap 'status=$?; if [[ $status -ne 0 ]]; then kill "$(cat "$ROOT/orthanc.pid")" 2>/dev/null; rm -rf "$ROOT"; fi' EXIT
  for _ in $(seq 1 60); do
    answers && break
    if ! kill -0 "$(cat "$ROOT/orthanc.pid")" 2>/dev/null; then
      echo "orthanc.sh: Orthanc exited; its log:" >&2
      tail -n 20 "$ROOT/orthanc.log" >&2
      exit 1
    fi
    sleep 0.5
  done
  if ! answers; then
    echo "orthanc.sh: Orthanc did not answer on 127.0.0.1:$HTTP_PORT within 30 s" >&2
    exit 1
  fi
  echo "orthanc.sh: started Orthanc (pid $(cat "$ROOT/orthanc.pid")), config and data in $ROOT" >&2
  echo "export CXR_CI_ORTHANC_PID=$(cat "$ROOT/orthanc.pid")"
  echo "export CXR_CI_ORTHANC_ROOT=$ROOT"
fi
curl -fsS -m 5 -u "$USER_NAME:$USER_PASSWORD" "http://127.0.0.1:$HTTP_PORT/dicom-web/studies" \
  -H "Accept: application/dicom+json" >/dev/null
echo "orthanc.sh: ready: http://127.0.0.1:$HTTP_PORT/dicom-web" >&2
echo "export CXR_TEST_ORTHANC_URL=http://127.0.0.1:$HTTP_PORT"
echo "export CXR_TEST_ORTHANC_USER=$USER_NAME"
echo "export CXR_TEST_ORTHANC_PASSWORD=$USER_PASSWORD"
echo "export CXR_TEST_ORTHANC_DICOM_PORT=$DICOM_PORT"
echo "export CXR_TEST_LISTEN_PORT=$LISTEN_PORT"
