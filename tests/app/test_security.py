"""API keys: one entry per comma, hashes as `sha256:<hex>`, unusable entries refused,
and the documented form end to end through HTTP (TestClient and a real `cxr serve`)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_fixtures import free_port

from app.cli import main
from app.main import create_app
from app.security import (
    ApiKeys,
    InvalidApiKeyConfig,
    generate_api_key,
    hash_api_key,
    parse_api_key_entry,
    parse_named_entry,
    split_api_keys,
)
from app.settings import Settings, SettingsError, build_settings

PLAIN = "a-long-enough-plain-key"
REPORT = {"text": "No acute disease."}


def _apikey_line(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """(key, CXR_API_KEYS value) exactly as `cxr apikey` prints them."""
    assert main(["apikey"]) == 0
    key_line, env_line = capsys.readouterr().out.splitlines()
    return key_line.split()[-1], env_line.split("=", 1)[1]


@pytest.mark.issue(44)
def test_security_keys_have_names_for_the_worklist_reviewer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = generate_api_key()
    assert main(["apikey", "--name", "dr-smith"]) == 0
    named = capsys.readouterr().out.splitlines()[1].split("=", 1)[1]
    assert named.startswith("dr-smith=sha256:")
    keys = ApiKeys([named, hash_api_key(key), PLAIN + "=="])  # base64 padding stays a key
    printed = Settings(api_keys=named).api_keys  # the settings accept the named form
    assert printed == [named]
    unnamed = f"key-{hash_api_key(key)[7:15]}"
    assert keys.name_of(key) == unnamed and keys.check(PLAIN + "==")
    assert keys.name_of("not a key at all") is None
    assert parse_named_entry(PLAIN + "==")[0].startswith("key-")
    for bad in ("9lives=" + hash_api_key(key), "a b=" + hash_api_key(key)):
        with pytest.raises(InvalidApiKeyConfig, match="name before '='"):
            parse_named_entry(bad)
    assert main(["apikey", "--name", "has space"]) != 0


def test_security_accepts_clear_and_hashed_keys() -> None:
    key = generate_api_key()
    keys = ApiKeys([PLAIN, hash_api_key(key), hash_api_key("x" * 16).upper().replace("SHA", "sha")])
    assert keys.enabled and len(keys) == 3
    assert keys.check(PLAIN) and keys.check(key) and keys.check("x" * 16)
    assert not keys.check(PLAIN + " ") and not keys.check("") and not keys.check(hash_api_key(key))
    assert PLAIN not in repr(vars(keys))  # only hashes are kept


def test_security_no_keys_means_disabled() -> None:
    assert not ApiKeys([]).enabled
    assert split_api_keys("") == [] and split_api_keys("   ") == []


def test_security_split_is_per_comma_never_on_colon() -> None:
    digest = "ab" * 32
    assert split_api_keys(f"sha256:{digest}") == [f"sha256:{digest}"]
    assert split_api_keys(f" sha256:{digest} , {PLAIN}") == [f"sha256:{digest}", PLAIN]
    assert split_api_keys("k1,,k2") == ["k1", "", "k2"]  # kept, so that it is refused


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("short-key", "9 characters"),
        ("sha256", "bare algorithm name"),
        ("SHA512", "bare algorithm name"),
        ("sha-256", "bare algorithm name"),
        ("md5", "bare algorithm name"),
        ("sha256:", "bare algorithm name"),
        ("sha256:1234", "exactly 64 hex digits"),
        ("sha256:" + "g" * 64, "exactly 64 hex digits"),
        ("sha256:" + "a" * 65, "exactly 64 hex digits"),
        ("sha512:" + "a" * 128, "only sha256"),
        ("a" * 64, "without the sha256: prefix"),
        # the documented hash, mangled on its way into the environment
        ('"sha256:' + "a" * 64 + '"', "inside other characters"),
        ("'sha256:" + "a" * 64 + "'", "inside other characters"),
        ("sha256 :" + "a" * 64, "inside other characters"),
        ("sha256=" + "a" * 64, "inside other characters"),
        ("sha256-" + "a" * 64, "inside other characters"),
        ("{SHA256}" + "a" * 64, "inside other characters"),
        ("CXR_API_KEYS=sha256:" + "a" * 64, "inside other characters"),
        ('"a-long-enough-clear-key"', "whitespace or quote"),
        ("a long enough clear key", "whitespace or quote"),
    ],
)
@pytest.mark.issue(7)
def test_security_refuses_unusable_entries(entry: str, reason: str) -> None:
    with pytest.raises(InvalidApiKeyConfig, match=reason):
        parse_api_key_entry(entry, 2)
    with pytest.raises(InvalidApiKeyConfig, match="entry 1"):
        ApiKeys([entry])


def test_security_plain_key_with_colon_is_a_key() -> None:
    assert (
        parse_api_key_entry("team:" + "k" * 16)
        == hashlib.sha256(("team:" + "k" * 16).encode()).hexdigest()
    )


@pytest.mark.parametrize(
    "value", ["sha256", "sha256,", ",sha256:" + "a" * 64, "tiny", "a" * 64, "k" * 20 + ",,x" * 3]
)
def test_settings_refuse_bad_api_keys_without_echoing_them(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CXR_API_KEYS", value)
    with pytest.raises(SettingsError, match="CXR_API_KEYS") as info:
        build_settings()
    message = str(info.value)
    assert "\n" not in message
    for secret in (part for part in value.split(",") if len(part) >= 4 and "sha" not in part):
        assert secret not in message


def test_settings_read_documented_form_as_one_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key, env_value = _apikey_line(capsys)
    monkeypatch.setenv("CXR_API_KEYS", env_value)
    assert Settings().api_keys == [env_value]
    monkeypatch.setenv("CXR_API_KEYS", f"{env_value},{PLAIN}")
    assert build_settings().api_keys == [env_value, PLAIN]


@pytest.mark.issue(7)
def test_cli_serve_refuses_bad_api_keys_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, env_value = _apikey_line(capsys)
    for bad in (env_value.split(":")[0], env_value.split(":")[1], f"{env_value},", "short"):
        monkeypatch.setenv("CXR_API_KEYS", bad)
        assert main(["serve", "--host", "127.0.0.1", "--port", "1"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "CXR_API_KEYS entry" in err[0], err
        assert "Traceback" not in err[0]


def _statuses(post: Callable[[dict[str, str]], int], key: str, env_value: str) -> dict[str, int]:
    digest = env_value.split(":", 1)[1]
    return {
        "real key": post({"X-API-Key": key}),
        "plain key": post({"X-API-Key": PLAIN}),
        "sha256": post({"X-API-Key": "sha256"}),
        "bare hex": post({"X-API-Key": digest}),
        "whole hash line": post({"X-API-Key": env_value}),
        "key with blank": post({"X-API-Key": key + " x"}),
        "empty header": post({"X-API-Key": ""}),
        "no key": post({}),
    }


EXPECTED = {
    "real key": 200,
    "plain key": 200,
    "sha256": 403,
    "bare hex": 403,
    "whole hash line": 403,
    "key with blank": 403,
    "empty header": 401,
    "no key": 401,
}


@pytest.mark.issue(7)
def test_api_keys_documented_form_through_http(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    make_settings: Callable[..., Settings],
) -> None:
    key, env_value = _apikey_line(capsys)
    # Exactly as the README says: the environment variable, read by the settings.
    monkeypatch.setenv("CXR_API_KEYS", f"{env_value}, {PLAIN}")
    settings = make_settings()
    assert len(settings.api_keys) == 2
    with TestClient(create_app(settings)) as client:

        def post(headers: dict[str, str]) -> int:
            status: int = client.post("/v1/reports/label", json=REPORT, headers=headers).status_code
            return status

        assert _statuses(post, key, env_value) == EXPECTED
        assert client.get("/v1/batches", headers={"X-API-Key": "sha256"}).status_code == 403
        assert client.get("/healthz").status_code == 200  # probes need no key
        body = client.post("/v1/reports/label", json=REPORT).json()
        assert body == {"detail": "missing X-API-Key header", "error": "Unauthorized"}


@pytest.mark.slow
def test_api_keys_documented_form_through_real_cxr_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, env_value = _apikey_line(capsys)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
    env.update(
        CXR_API_KEYS=f"{env_value},{PLAIN}",
        CXR_STORAGE_DIR=str(tmp_path / "storage"),
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(base + "/readyz", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"cxr serve did not start: {server.stderr.read()!r}")  # type: ignore[union-attr]
                time.sleep(0.3)

        def post(headers: dict[str, str]) -> int:
            request = urllib.request.Request(
                base + "/v1/reports/label",
                data=b'{"text": "No acute disease."}',
                headers={"Content-Type": "application/json", **headers},
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return int(response.status)
            except urllib.error.HTTPError as exc:
                return exc.code

        assert _statuses(post, key, env_value) == EXPECTED
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.issue(7)
def test_cli_serve_public_host_needs_a_valid_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import uvicorn

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: calls.append(kwargs))
    monkeypatch.setenv("CXR_STORAGE_DIR", str(tmp_path))
    args = ["serve", "--host", "0.0.0.0", "--port", "8123"]
    assert main(args) == 2  # no keys
    assert "without API keys" in capsys.readouterr().err
    monkeypatch.setenv("CXR_API_KEYS", "sha256")  # what the old parser made of the hash
    assert main(args) == 2 and "bare algorithm name" in capsys.readouterr().err
    _, env_value = _apikey_line(capsys)
    monkeypatch.setenv("CXR_API_KEYS", env_value)
    assert main(args) == 0
    assert calls and calls[0]["host"] == "0.0.0.0"
    assert not calls[1:]
