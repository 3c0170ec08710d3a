"""The DICOMweb client (batch/pacs/dicomweb.py) against a scripted server (httpx.MockTransport)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import date

import httpx
import pytest

from batch.pacs.dicomweb import (
    DicomwebClient,
    DicomwebError,
    InstanceRef,
    parse_multipart,
    redact_url,
)

pytestmark = pytest.mark.issue(10)

URL = "http://pacs.test/dicom-web"
STUDY, SERIES, SOP = "1.2.3", "1.2.3.4", "1.2.3.4.5"
CR = "1.2.840.10008.5.1.4.1.1.1"


def _client(handler: Callable[[httpx.Request], httpx.Response], **kwargs: object) -> DicomwebClient:
    return DicomwebClient(URL, transport=httpx.MockTransport(handler), **kwargs)  # type: ignore[arg-type]


def _uid(tag: str, value: str) -> dict[str, object]:
    return {tag: {"vr": "UI", "Value": [value]}}


def test_dicomweb_search_filters_paging_and_series_modality(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("batch.pacs.dicomweb._PAGE", 2)
    seen: list[httpx.Request] = []
    full_page = [_uid("0020000D", STUDY), _uid("0020000D", "1.2.9")]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        path, params = request.url.path, request.url.params
        if path.endswith("/studies"):
            if params["offset"] == "0":
                return httpx.Response(200, json=full_page)  # a full page: ask for the next
            return httpx.Response(200, json=[_uid("0020000D", STUDY)])
        if path.endswith("/studies/1.2.9/series"):
            return httpx.Response(204)  # no series (an empty answer)
        if path.endswith(f"/studies/{STUDY}/series"):
            # A full page each time, offset ignored (some servers do): no endless paging.
            return httpx.Response(
                200,
                json=[
                    _uid("0020000E", SERIES) | {"00080060": {"vr": "CS", "Value": ["CR"]}},
                    _uid("0020000E", "9.9") | {"00080060": {"vr": "CS", "Value": ["CT"]}},
                ],
            )
        if path.endswith(f"/series/{SERIES}/instances"):
            return httpx.Response(200, json=[_uid("00080018", SOP) | _uid("00080016", CR)])
        return httpx.Response(404)

    with _client(handler, user="ai", password="s3cret") as web:
        refs = list(web.iter_instances(since=date(2024, 1, 2), modalities=("CR",)))
    assert refs == [InstanceRef(STUDY, SERIES, SOP)]
    assert refs[0].sop_class_uid == CR and refs[0].modality == "CR"
    first = seen[0]
    assert first.url.params["StudyDate"] == "20240102-"
    assert first.url.params["ModalitiesInStudy"] == "CR"
    assert first.headers["accept"] == "application/dicom+json"
    assert first.headers["authorization"] == "Basic " + base64.b64encode(b"ai:s3cret").decode()
    assert [r.url.params.get("offset") for r in seen[:2]] == ["0", "2"]
    assert not any("9.9" in str(r.url) for r in seen)  # the CT series is never listed


def test_dicomweb_retrieve_parses_multipart_and_names_failures() -> None:
    body = b"--b0\r\nContent-Type: application/dicom\r\n\r\nDICM-bytes\r\n--b0--\r\n"

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer tok"
        if SOP in request.url.path:
            ctype = 'multipart/related; type="application/dicom"; boundary=b0'
            return httpx.Response(200, content=body, headers={"content-type": ctype})
        return httpx.Response(404, text="Unknown resource")

    with _client(handler, token="tok") as web:
        assert web.retrieve_instance(InstanceRef(STUDY, SERIES, SOP)) == b"DICM-bytes"
        with pytest.raises(DicomwebError) as err:
            web.retrieve_instance(InstanceRef(STUDY, SERIES, "7.7"))
    message = str(err.value)
    assert message.startswith(f"GET {URL}/studies/{STUDY}/series/{SERIES}/instances/7.7")
    assert "HTTP 404" in message and "Unknown resource" in message


@pytest.mark.parametrize("bad", ["../../system", "1.2.3/../4", "1.2.x", "", "1." * 40])
def test_dicomweb_refuses_uids_that_are_not_uids(bad: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no request expected, got {request.url}")

    with _client(handler) as web, pytest.raises(DicomwebError, match="not a DICOM UID"):
        web.search_studies(study_uids=[bad])


def test_dicomweb_timeouts_and_refused_connections_are_one_clear_error() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with _client(slow, timeout=2.5) as web, pytest.raises(DicomwebError) as err:
        web.search_studies()
    assert str(err.value) == f"GET {URL}/studies: no answer within 2.5 s (timeout)"

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    with _client(refused) as web, pytest.raises(DicomwebError, match="ConnectError"):
        web.search_studies()


def test_dicomweb_store_reports_stored_and_failed_instances() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        parts = parse_multipart(request.headers["content-type"], request.content)
        assert [body for _, body in parts] == [b"one", b"two\r\n"]
        assert all(h["content-type"] == "application/dicom" for h, _ in parts)
        return httpx.Response(
            202,
            json={
                "00081199": {"vr": "SQ", "Value": [_uid("00081155", "1.1")]},
                "00081198": {
                    "vr": "SQ",
                    "Value": [_uid("00081155", "2.2") | {"00081197": {"vr": "US", "Value": [272]}}],
                },
            },
        )

    with _client(handler) as web:
        outcome = web.store([b"one", b"two\r\n"])
        assert web.store([]).stored == []  # nothing to send: no request
    assert outcome.stored == ["1.1"] and outcome.failed == {"2.2": "failure reason 0x0110"}


def test_dicomweb_credentials_never_appear_in_messages() -> None:
    assert redact_url("http://ai:pw@pacs:8042/dicom-web") == "http://pacs:8042/dicom-web"

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"].startswith("Basic ")
        return httpx.Response(401)

    web = DicomwebClient("http://ai:pw@pacs.test/dicom-web", transport=httpx.MockTransport(handler))
    with pytest.raises(DicomwebError) as err:
        web.search_studies()
    assert "pw" not in str(err.value) and "HTTP 401" in str(err.value)
    with pytest.raises(DicomwebError, match="either --user/--password or --token"):
        DicomwebClient(URL, user="a", token="t")
    with pytest.raises(DicomwebError, match="must be http"):
        DicomwebClient("ftp://pacs/dicom-web")


def test_dicomweb_logs_no_uids_when_told(caplog: pytest.LogCaptureFixture) -> None:
    body = b"--b0\r\nContent-Type: application/dicom\r\n\r\nDICM\r\n--b0--\r\n"

    def handler(request: httpx.Request) -> httpx.Response:
        ctype = 'multipart/related; type="application/dicom"; boundary=b0'
        return httpx.Response(200, content=body, headers={"content-type": ctype})

    caplog.set_level("INFO", logger="batch.pacs.dicomweb")
    with _client(handler, log_uids=False) as web:
        web.retrieve_instance(InstanceRef(STUDY, SERIES, SOP))
    assert "pulled study <uid> instance <uid> (4 bytes)" in caplog.text
    assert SOP not in caplog.text
