"""A hostile DICOMweb server (issue 18, items 2, 3 and 14), over real loopback HTTP:
the client (batch/pacs/dicomweb.py) and `cxr batch --dicomweb` stay bounded in memory
and time, fail clearly, and fail only what the server broke. The service's jobs against
the same server: tests/app/test_jobs_hostile_dicomweb.py."""

from __future__ import annotations

import gzip
import io
import json
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydicom
import pytest
from hostile_pacs import HostileDicomweb, chest_instances, tag, with_bad_series

from app.cli import main
from batch.dicomweb_source import ref_from_key
from batch.pacs.dicomweb import (
    DicomwebAborted,
    DicomwebClient,
    DicomwebError,
    DicomwebLimits,
    InstanceRef,
    SearchFailure,
)

pytestmark = pytest.mark.issue(18)

WADO = r"/instances/[^/]+$"
MiB = 2**20


def _ref(data: bytes) -> InstanceRef:
    ds = pydicom.dcmread(io.BytesIO(data), stop_before_pixels=True)
    return InstanceRef(ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.SOPInstanceUID)


@pytest.fixture
def one_image() -> Iterator[tuple[HostileDicomweb, InstanceRef]]:
    data = chest_instances(1)
    with HostileDicomweb(data) as pacs:
        yield pacs, _ref(data[0])


def _client(pacs: HostileDicomweb, **limits: int) -> DicomwebClient:
    timeout = limits.pop("timeout", 10)
    return DicomwebClient(pacs.url, timeout=timeout, limits=DicomwebLimits(**limits))


# --- bytes: gzip bombs and huge answers ----------------------------------------------------


def test_dicomweb_gzip_bomb_is_cut_at_the_cap_while_inflating(
    one_image: tuple[HostileDicomweb, InstanceRef],
) -> None:
    pacs, ref = one_image
    pacs.on(WADO, pacs.gzip_bomb(decoded=64 * MiB))  # ~64 KB on the wire
    tracemalloc.start()
    try:
        with _client(pacs, max_instance_bytes=MiB) as web, pytest.raises(DicomwebError) as err:
            web.retrieve_instance(ref)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "larger than 1 MiB (decoded)" in str(err.value)
    assert "CXR_DICOMWEB_MAX_INSTANCE_MB" in str(err.value)
    assert peak < 8 * MiB  # main inflated all 64 MiB before looking


def test_dicomweb_huge_answer_is_cut_on_the_wire_not_read_whole(
    one_image: tuple[HostileDicomweb, InstanceRef],
) -> None:
    pacs, ref = one_image
    pacs.on(WADO, pacs.huge(512 * MiB, declare_length=False))
    with _client(pacs, max_instance_bytes=MiB) as web, pytest.raises(DicomwebError) as err:
        web.retrieve_instance(ref)
    assert "larger than 1 MiB" in str(err.value)
    time.sleep(0.2)
    assert pacs.bytes_sent < 64 * MiB and pacs.hangups == 1  # the client hung up early

    pacs.on(WADO, pacs.huge(512 * MiB))  # declared: refused from its Content-Length
    with _client(pacs, max_instance_bytes=MiB) as web, pytest.raises(DicomwebError) as err:
        web.retrieve_instance(ref)
    assert "(declared Content-Length 53687" in str(err.value)  # 512 MiB and its head


def test_dicomweb_answers_under_the_caps_still_arrive(
    one_image: tuple[HostileDicomweb, InstanceRef],
) -> None:
    pacs, ref = one_image
    with _client(pacs, max_instance_bytes=MiB, max_json_bytes=4096) as web:
        assert [r for r in web.iter_instances() if isinstance(r, InstanceRef)] == [ref]
        assert web.retrieve_instance(ref) == pacs.files[ref.sop_instance_uid]
    pacs.on(WADO, pacs.gzip_bomb(decoded=MiB))  # exactly at the cap: accepted
    with _client(pacs, max_instance_bytes=MiB) as web, pytest.raises(DicomwebError) as err:
        web.retrieve_instance(ref)
    assert "boundary" not in str(err.value) and "expected one DICOM part, got 0" in str(err.value)


def _studies_json(uid: str) -> bytes:
    return json.dumps([tag("0020000D", uid)]).encode()


@pytest.mark.parametrize(
    ("coding", "pack", "error"),
    [
        ("gzip", lambda b: gzip.compress(b), None),
        ("deflate", lambda b: zlib.compress(b), None),  # zlib-wrapped, as the RFC says
        ("deflate", lambda b: zlib.compress(b)[2:-4], None),  # raw, as some servers send
        ("gzip", lambda b: gzip.compress(b)[:20] + b"garbage" * 10, "the gzip answer is corrupt"),
        # Cut short: inflates to a valid answer, or to nothing ("no studies"), unless the
        # missing end is noticed (the garbage case above was such a cut one time in six).
        ("gzip", lambda b: gzip.compress(b)[:-8], "the gzip answer is corrupt"),
        ("gzip", lambda b: gzip.compress(b)[:12], "the gzip answer is corrupt"),
        ("deflate", lambda b: zlib.compress(b)[:-4], "the deflate answer is corrupt"),
        ("br", lambda b: b, "unsupported Content-Encoding 'br'"),
    ],
    ids=[
        "gzip",
        "deflate-zlib",
        "deflate-raw",
        "corrupt-gzip",
        "gzip-without-trailer",
        "gzip-cut-early",
        "deflate-without-checksum",
        "brotli",
    ],
)
def test_dicomweb_compressed_answers_inflate_or_fail_cleanly(
    one_image: tuple[HostileDicomweb, InstanceRef],
    coding: str,
    pack: Callable[[bytes], bytes],
    error: str | None,
) -> None:
    pacs, ref = one_image
    body = pack(_studies_json(ref.study_instance_uid))
    pacs.on(r"/studies$", pacs.raw(body, Content_Encoding=coding))
    with _client(pacs) as web:
        if error is None:
            assert web.search_studies() == [ref.study_instance_uid]
        else:
            with pytest.raises(DicomwebError, match=error):
                web.search_studies()


# --- time: a deadline for the whole request ------------------------------------------------


@pytest.mark.parametrize("head", [False, True], ids=["slow-body", "slow-headers"])
def test_dicomweb_deadline_bounds_the_whole_request_not_each_read(
    one_image: tuple[HostileDicomweb, InstanceRef], head: bool
) -> None:
    pacs, ref = one_image
    pacs.on(WADO, pacs.slow(0.1, head=head))  # a byte every 0.1 s: no read ever times out
    began = time.monotonic()
    with _client(pacs, timeout=1) as web, pytest.raises(DicomwebError) as err:
        web.retrieve_instance(ref)
    assert time.monotonic() - began < 2.0
    assert "no complete answer within 1 s" in str(err.value)


def test_dicomweb_abort_cuts_the_request_in_flight(
    one_image: tuple[HostileDicomweb, InstanceRef],
) -> None:
    pacs, ref = one_image
    pacs.on(WADO, pacs.slow(0.2, body=b"x" * 10**6))
    web = _client(pacs, timeout=60)
    threading.Timer(0.5, web.abort, args=("job cancelled",)).start()
    began = time.monotonic()
    with pytest.raises(DicomwebAborted, match="job cancelled"):
        web.retrieve_instance(ref)
    assert time.monotonic() - began < 2.0
    with pytest.raises(DicomwebAborted):  # and every later request
        list(web.iter_instances())
    web.close()


# --- QIDO-RS: paging, JSON, UIDs, redirects ------------------------------------------------


def test_dicomweb_endless_paging_stops_at_the_results_cap(
    one_image: tuple[HostileDicomweb, InstanceRef],
) -> None:
    pacs, _ = one_image
    pacs.on(r"/studies$", pacs.endless_pages())
    with _client(pacs, max_results=1200) as web, pytest.raises(DicomwebError) as err:
        list(web.iter_instances())
    assert "more than 1200 results in one search" in str(err.value)
    assert "CXR_DICOMWEB_MAX_RESULTS" in str(err.value)
    assert len(pacs.requests) == 3  # pages of 500: 500, 1000, 1500 > 1200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nests deeper than 64 levels"),
        (b"[" * 100_000, "nests too deeply"),  # unbalanced: left to the parser, still clean
        (b'[{"a": ' * 40 + b"1" + b"}]" * 40, "nests deeper than 64 levels"),
        (b'[{"0020000D": "not an element"}, 7, "x"]', None),  # odd shapes: ignored
    ],
    ids=["deep", "unbalanced", "objects", "odd-shapes"],
)
def test_dicomweb_hostile_json_is_a_clean_error(
    one_image: tuple[HostileDicomweb, InstanceRef], body: bytes, message: str | None
) -> None:
    pacs, _ = one_image
    pacs.on(r"/studies$", pacs.raw(body))
    with _client(pacs) as web:
        if message is None:
            assert list(web.iter_instances()) == []
            return
        with pytest.raises(DicomwebError, match=message):
            list(web.iter_instances())


def test_dicomweb_uid_ending_in_a_newline_is_refused() -> None:
    with DicomwebClient("http://127.0.0.1:9/dicom-web") as web:
        with pytest.raises(DicomwebError, match="not a DICOM UID"):
            web.search_studies(study_uids=["1.2.3\n"])
        with pytest.raises(DicomwebError, match="not a DICOM UID"):
            web.retrieve_instance(InstanceRef("1.2", "1.3", "1.4\n"))
    with pytest.raises(DicomwebError):
        ref_from_key("studies/1.2/series/1.3/instances/1.4\n")


@pytest.mark.parametrize(
    "location", ["http://evil.example:8080/dicom-web/studies", "/elsewhere/studies"]
)
def test_dicomweb_redirect_is_an_error_and_not_followed(
    one_image: tuple[HostileDicomweb, InstanceRef], location: str
) -> None:
    pacs, _ = one_image
    pacs.on(r"/studies$", pacs.redirect(location))
    with _client(pacs) as web, pytest.raises(DicomwebError) as err:
        list(web.iter_instances())
    message = str(err.value)
    assert "HTTP 302" in message and "redirects are not followed" in message
    assert ("evil.example:8080" in message) == location.startswith("http://evil")
    assert len(pacs.requests) == 1  # nothing followed


# --- one bad series is that series' failure ------------------------------------------------


def test_dicomweb_one_bad_series_does_not_abort_the_search() -> None:
    good = chest_instances(2)
    with with_bad_series(good) as pacs, _client(pacs) as web:
        found = list(web.iter_instances(modalities=("CR", "DX")))
    failures = [f for f in found if isinstance(f, SearchFailure)]
    refs = [r for r in found if isinstance(r, InstanceRef)]
    assert sorted(r.sop_instance_uid for r in refs) == sorted(
        _ref(d).sop_instance_uid for d in good
    )
    reasons = {f.path.split("/series/")[1]: f.reason for f in failures}
    assert reasons.keys() == {"1.2.500", next(k for k in reasons if k.startswith("invalid-"))}
    assert "'1.2.3\\n' is not a DICOM UID" in reasons[next(k for k in reasons if "invalid" in k)]
    assert "HTTP 500" in reasons["1.2.500"] and "database on fire" in reasons["1.2.500"]


def test_cli_batch_dicomweb_bad_series_and_bad_instances_fail_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = chest_instances(3)
    with with_bad_series(good) as pacs:
        bomb, slow = (_ref(d).sop_instance_uid for d in good[:2])
        pacs.on(rf"/instances/{bomb}$", pacs.gzip_bomb(decoded=8 * MiB))
        pacs.on(rf"/instances/{slow}$", pacs.slow(0.1))
        out = tmp_path / "out.jsonl"
        began = time.monotonic()
        status = main(
            ["batch", "--dicomweb", pacs.url, "-o", str(out), "--timeout", "1",
             "--max-instance-mb", "1"]
        )  # fmt: skip
    assert time.monotonic() - began < 15
    assert status == 1
    lines = {line["path"]: line for line in map(json.loads, out.read_text().splitlines())}
    by_sop = {p.rsplit("/", 1)[1]: line for p, line in lines.items() if "/instances/" in p}
    assert "larger than 1 MiB (decoded)" in by_sop[bomb]["error"]
    assert "within 1 s" in by_sop[slow]["error"]
    assert by_sop[_ref(good[2]).sop_instance_uid]["state"] == "done"
    series_failures = [line for p, line in lines.items() if "/instances/" not in p]
    assert len(series_failures) == 2 and all(f["state"] == "failed" for f in series_failures)
    assert "4 failed" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (lambda p: p.redirect("http://evil.example/x"), "HTTP 302"),
        (lambda p: p.raw(b"[" * 50_000 + b"]" * 50_000), "nests deeper than 64"),
        (lambda p: p.endless_pages(), "more than 1000 results"),
        (lambda p: p.raw(b"", 401, "text/plain"), "HTTP 401"),
    ],
    ids=["redirect", "nested-json", "endless-paging", "unauthorized"],
)
def test_cli_batch_dicomweb_search_failure_is_one_line_and_nonzero(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rule: Callable[[HostileDicomweb], Any],
    expected: str,
) -> None:
    with HostileDicomweb(chest_instances(1)) as pacs:
        pacs.on(r"/studies$", rule(pacs))
        status = main(
            ["batch", "--dicomweb", pacs.url, "-o", str(tmp_path / "o.jsonl"),
             "--max-results", "1000"]
        )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert err.startswith("cxr batch: error: GET ") and expected in err and "\n" not in err
