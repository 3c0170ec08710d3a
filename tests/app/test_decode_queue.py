"""The wait for a decode slot: bounded in all and per client, and dropped when the client
leaves (issue 42 H2), on a real server.

Before: 50 uploads that each decoded for minutes queued without limit, and 21 of them were
still decoded after their clients had gone, holding image prediction for 25 minutes. Here
one decode slot is held by a gated decode (the test opens the gate) while other uploads
arrive from the same address.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from service_fixtures import LiveServer, dx_bytes

import app.image_intake
from app.settings import Settings

pytestmark = pytest.mark.issue(42)

DICOM = b"application/dicom"


class GatedDecodes:
    """`app.image_intake._load` that holds every decode until `gate` opens; counts them."""

    def __init__(self, load: Callable[..., Any]) -> None:
        self.load = load
        self.gate = threading.Event()
        self.started = 0

    def __call__(self, *args: Any) -> Any:
        self.started += 1
        self.gate.wait(30)
        return self.load(*args)


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedDecodes]:
    decodes = GatedDecodes(app.image_intake._load)
    monkeypatch.setattr(app.image_intake, "_load", decodes)
    yield decodes
    decodes.gate.set()


def _live(make_settings: Callable[..., Settings], predictor: Any, **limits: Any) -> LiveServer:
    settings = make_settings(
        max_concurrent_decodes=1, decode_in_workers=False, run_batch_jobs=False, **limits
    )
    return LiveServer(settings, predictor=predictor)


def _send_upload(port: int) -> socket.socket:
    """POST an upload on a raw socket and return it unanswered."""
    body = dx_bytes()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        b"POST /v1/images/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
        + DICOM
        + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def _status(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, json.loads(response.read())


def _until(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_an_upload_whose_client_left_is_not_decoded(
    make_settings: Callable[..., Settings], demo_predictor: Any, gated: GatedDecodes
) -> None:
    with _live(make_settings, demo_predictor) as live:
        inference = live.app.state.cxr.inference
        first = _send_upload(live.port)
        _until(lambda: gated.started == 1)
        second = _send_upload(live.port)
        _until(lambda: inference._waiting == 1)
        second.close()  # the client gives up while its upload waits
        _until(lambda: inference._waiting == 0)
        gated.gate.set()
        with first:
            assert _status(first)[0] == 200
        time.sleep(0.2)
        assert gated.started == 1  # the abandoned upload was never decoded


@pytest.mark.parametrize(
    ("limits", "setting"),
    [
        ({"max_decodes_per_client": 2}, "CXR_MAX_DECODES_PER_CLIENT"),
        ({"max_waiting_decodes": 1}, "CXR_MAX_WAITING_DECODES"),
    ],
)
def test_waiting_uploads_are_bounded(
    make_settings: Callable[..., Settings],
    demo_predictor: Any,
    gated: GatedDecodes,
    limits: dict[str, int],
    setting: str,
) -> None:
    with _live(make_settings, demo_predictor, **limits) as live:
        running = _send_upload(live.port)
        _until(lambda: gated.started == 1)
        waiting = _send_upload(live.port)
        _until(lambda: live.app.state.cxr.inference._waiting == 1)
        start = time.monotonic()
        with _send_upload(live.port) as refused:
            status, body = _status(refused)
        assert status == 503 and time.monotonic() - start < 2
        assert body["error"] == "DecodeQueueFull" and setting in body["detail"]
        gated.gate.set()
        for sock in (running, waiting):
            with sock:
                assert _status(sock)[0] == 200


def _send_named_upload(port: int, name: str, route: str = "predict") -> socket.socket:
    """POST a multipart upload sent under `name` to an image route (`predict` or `ask`)
    on a raw socket; return it unanswered."""
    body = dx_bytes()
    boundary = b"cxrtestboundary"
    question = b""
    if route == "ask":
        question = (
            b"--" + boundary + b'\r\nContent-Disposition: form-data; name="question"\r\n\r\n'
            b"Is there an effusion?\r\n"
        )
    form = question + (
        b"--" + boundary + b"\r\n"
        b'Content-Disposition: form-data; name="file"; filename="' + name.encode() + b'"\r\n'
        b"Content-Type: application/dicom\r\n\r\n" + body + b"\r\n--" + boundary + b"--\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        ("POST /v1/images/predict" if route == "predict" else "POST /v1/studies/ask").encode()
        + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: multipart/form-data; boundary="
        + boundary
        + b"\r\n"
        + f"Content-Length: {len(form)}\r\n\r\n".encode()
        + form
    )
    return sock


@pytest.mark.parametrize("route", ["predict", "ask"])
def test_a_running_decode_whose_client_left_is_stopped(
    make_settings: Callable[..., Settings], demo_predictor: Any, route: str
) -> None:
    """A decode that would run for a minute (a worker that hangs, as a slow codestream
    would) is killed once its client disconnects: its slot serves the next upload within
    seconds, not at CXR_DECODE_TIMEOUT_S."""
    from troubled_decoder import troubled_upload_load

    from models.upload_decoding import UploadDecoders

    settings = make_settings(
        max_concurrent_decodes=1, decode_in_workers=True, decode_timeout_s=120.0,
        run_batch_jobs=False,
    )  # fmt: skip
    with LiveServer(settings, predictor=demo_predictor) as live:
        inference = live.app.state.cxr.inference
        inference.decoders.close()
        inference.decoders = UploadDecoders(1, timeout_s=120.0, fn=troubled_upload_load)
        hung = _send_named_upload(live.port, "hang.dcm", route)
        _until(lambda: inference._decoding == 1 and inference._waiting == 0)
        time.sleep(0.5)  # the worker is decoding (sleeping) now
        start = time.monotonic()
        hung.close()  # the client gives up
        _until(lambda: inference._decoding == 0, seconds=10)
        freed = time.monotonic() - start
        with _send_named_upload(live.port, "chest.dcm", route) as real:
            assert _status(real)[0] == 200
        answered = time.monotonic() - start
    assert freed < 5, f"the slot was freed {freed:.1f} s after the client left"
    assert answered < 20, f"the next upload was answered {answered:.1f} s after"
