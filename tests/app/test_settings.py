"""Settings from CXR_* environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Settings


def test_settings_parse_lists_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXR_API_KEYS", "key-one-sixteen-c, key-two-sixteen-c")
    monkeypatch.setenv("CXR_BATCH_ROOTS", "/data/a:/data/b")
    monkeypatch.setenv("CXR_MAX_UPLOAD_MB", "5")
    monkeypatch.setenv("CXR_STORAGE_DIR", str(tmp_path))
    settings = Settings()
    assert settings.api_keys == ["key-one-sixteen-c", "key-two-sixteen-c"]
    assert settings.batch_roots == [Path("/data/a"), Path("/data/b")]
    assert settings.max_upload_mb == 5
    assert settings.resolved_database_url == f"sqlite:///{tmp_path.resolve() / 'cxr.db'}"
    assert "key-one" not in repr(settings)  # keys never end up in logs


def test_settings_defaults_are_safe() -> None:
    settings = Settings()
    assert settings.host == "127.0.0.1"
    assert settings.max_upload_mb == 100
    assert settings.model is None and settings.api_keys == []
    assert not settings.log_patient_data and not settings.store_uploads


def test_settings_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="max_upload_mb"):
        Settings(max_upload_mb=0)


@pytest.mark.issue(19)
@pytest.mark.parametrize(("value", "expected"), [("0", 0), ("3", 3), ("", None), (None, None)])
def test_settings_batch_workers_default_to_the_cores(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: int | None
) -> None:
    import models.decode_pool

    monkeypatch.setattr(models.decode_pool, "default_workers", lambda: 6)
    if value is None:
        monkeypatch.delenv("CXR_BATCH_WORKERS", raising=False)
    else:
        monkeypatch.setenv("CXR_BATCH_WORKERS", value)
    settings = Settings()
    assert settings.batch_workers == expected
    assert settings.resolved_batch_workers == (6 if expected is None else expected)


def test_settings_refuse_negative_batch_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.settings import SettingsError, build_settings

    monkeypatch.setenv("CXR_BATCH_WORKERS", "-1")
    with pytest.raises(SettingsError, match="CXR_BATCH_WORKERS"):
        build_settings()


@pytest.mark.issue(19)
def test_settings_precision_from_env_and_refused_when_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.settings import SettingsError, build_settings

    monkeypatch.delenv("CXR_PRECISION", raising=False)
    assert Settings().precision == "auto"
    monkeypatch.setenv("CXR_PRECISION", "bfloat16")
    assert Settings().precision == "bfloat16"
    monkeypatch.setenv("CXR_PRECISION", "fp16")
    with pytest.raises(SettingsError, match="CXR_PRECISION"):
        build_settings()


@pytest.mark.parametrize(
    ("name", "value"), [("CXR_DECODE_IN_WORKERS", "maybe"), ("CXR_DECODE_TIMEOUT_S", "0")]
)
def test_settings_upload_decoding_refused_when_sloppy(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    from app.settings import SettingsError, build_settings

    monkeypatch.delenv("CXR_DECODE_IN_WORKERS", raising=False)
    assert Settings().decode_in_workers is True  # the safe default
    monkeypatch.setenv("CXR_DECODE_IN_WORKERS", "0")
    assert Settings().decode_in_workers is False
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        build_settings()
