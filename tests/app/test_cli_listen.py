"""`cxr listen` and `cxr batch --dicomweb` (app/cli/listen_command.py, app/cli/common.py):
the service's settings and the flags become the listener's limits and the DICOMweb client's
options. The listener and the client themselves: tests/batch/listen/ and tests/batch/pacs/."""

from __future__ import annotations

import pytest

from app.cli import build_parser
from app.settings import Settings
from batch.listen.association_guard import ListenerLimits


@pytest.mark.issue(18)
def test_listener_limits_validate_and_match_the_settings_defaults() -> None:
    settings = Settings()
    defaults = ListenerLimits()
    assert defaults.max_pdu == settings.listen_max_pdu
    assert defaults.max_dataset_bytes == settings.listen_max_dataset_mb * 1024 * 1024
    assert defaults.max_associations == settings.listen_max_associations
    assert defaults.max_associations_per_host == settings.listen_max_associations_per_host
    assert defaults.association_timeout_s == settings.listen_association_timeout_s
    assert defaults.idle_timeout_s == settings.listen_idle_timeout_s
    assert defaults.max_association_s == settings.listen_max_association_s
    assert defaults.evict_quiet_s == settings.listen_evict_quiet_s
    assert defaults.min_free_bytes == settings.listen_min_free_mb * 1024 * 1024
    with pytest.raises(ValueError, match="--max-pdu 0: must be between 4096"):
        ListenerLimits(max_pdu=0)
    with pytest.raises(ValueError, match="must not exceed --max-associations"):
        ListenerLimits(max_associations=2, max_associations_per_host=3)


@pytest.mark.issue(18)
def test_listen_flags_override_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.cli.listen_command import _listener_limits

    monkeypatch.setenv("CXR_LISTEN_MAX_DATASET_MB", "2")
    monkeypatch.setenv("CXR_LISTEN_IDLE_TIMEOUT_S", "30")
    monkeypatch.setenv("CXR_LISTEN_MIN_FREE_MB", "10")
    argv = ["listen", "--out", "o.jsonl", "--idle-timeout", "7", "--min-free-mb", "0.5"]
    limits = _listener_limits(build_parser().parse_args(argv), Settings())
    assert limits.max_dataset_bytes == 2 * 1024 * 1024  # from the setting
    assert limits.idle_timeout_s == 7  # the flag wins
    assert limits.min_free_bytes == 512 * 1024
    assert limits.max_associations_per_host == 4  # the default


@pytest.mark.issue(10)
@pytest.mark.issue(18)
def test_cli_dicomweb_client_logs_uids_only_when_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from app.cli.common import dicomweb_client_from_args

    args = argparse.Namespace(user=None, password=None, token=None, timeout=None)
    monkeypatch.delenv("CXR_LOG_PATIENT_DATA", raising=False)
    with dicomweb_client_from_args("http://127.0.0.1:9/dicom-web", args) as web:
        assert web.log_uids is False
    monkeypatch.setenv("CXR_LOG_PATIENT_DATA", "1")
    with dicomweb_client_from_args("http://127.0.0.1:9/dicom-web", args) as web:
        assert web.log_uids is True
